// copapy_kit::Hardware: what a ControlLoop reads its states from and writes its commands to,
// once per cycle, on the loop thread. Header-only (no key function), so a user's hardware class
// compiled into its own shared library (copapy.kits.cppyy.compile_cached) needs nothing else.
//
// Rules for an implementation: read() and write() run on the real-time thread every cycle; they
// must not block, allocate or call into Python. `t` is the nominal time of the cycle
// (cycle index x period, in seconds), the same in every run: a simulated plant integrates with
// its own fixed step, so runs are reproducible.
#ifndef COPAPY_KIT_HARDWARE_HPP
#define COPAPY_KIT_HARDWARE_HPP

#include <cstddef>

namespace copapy_kit {

class Hardware {
public:
    virtual ~Hardware() = default;
    // Fill state[0..n) (n = the loop's number of state values) with the current measurements.
    virtual void read(double t, double *state, std::size_t n) = 0;
    // Apply command[0..n) (n = the loop's number of command values).
    virtual void write(double t, const double *command, std::size_t n) = 0;
};

// States and commands in caller-owned double buffers (e.g. NumPy arrays shared with Python):
// each element is loaded and stored with a relaxed atomic access, so a value is never torn
// (but a group of values written from Python is not one atomic snapshot: use
// ControlLoop::write_parameter for that).
class BufferHardware : public Hardware {
public:
    BufferHardware(double *state, std::size_t n_state, double *command, std::size_t n_command)
        : state_(state), n_state_(n_state), command_(command), n_command_(n_command) {}

    void read(double, double *state, std::size_t n) override
    {
        for (std::size_t i = 0; i < n && i < n_state_; ++i) {
            __atomic_load(&state_[i], &state[i], __ATOMIC_RELAXED);
        }
    }

    void write(double, const double *command, std::size_t n) override
    {
        for (std::size_t i = 0; i < n && i < n_command_; ++i) {
            double v = command[i];
            __atomic_store(&command_[i], &v, __ATOMIC_RELAXED);
        }
    }

private:
    double *state_;
    std::size_t n_state_;
    double *command_;
    std::size_t n_command_;
};

}  // namespace copapy_kit

#endif  // COPAPY_KIT_HARDWARE_HPP
