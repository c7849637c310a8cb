// The ROS-free part of the copapy ros2_control controller: a copapy program image run through
// libcopapy (copapy/copapy.h), its state inputs and command outputs bound by port name, and a
// preallocated per-cycle record. Header-only; used by the controller plugin
// (copapy_controller.cpp) and by the loop that reproduces ros2_control_node's timing without ROS
// (copapy.kits.ros2_control, rc_emulation.cpp). update() never allocates.
#ifndef COPAPY_ROS2_CONTROL_CONTROLLER_CORE_HPP
#define COPAPY_ROS2_CONTROL_CONTROLLER_CORE_HPP

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "copapy/copapy.h"

namespace copapy_ros2_control {

inline int64_t monotonic_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// One record row per update: the monotonic time at entry, the period the loop passed, the
// states fed and the commands produced.
class Recorder {
public:
    void reserve(std::size_t cycles, std::size_t n_state, std::size_t n_command)
    {
        cap_ = cycles;
        ns_ = n_state;
        nc_ = n_command;
        t_.assign(cycles, 0);
        period_.assign(cycles, 0);
        exec_.assign(cycles, 0);
        values_.assign(cycles * (n_state + n_command), 0.0);
        n_ = 0;
    }

    void add(int64_t t, int64_t period, int64_t exec, const double *states, const double *commands)
    {
        if (n_ >= cap_) {
            return;
        }
        t_[n_] = t;
        period_[n_] = period;
        exec_[n_] = exec;
        double *row = &values_[n_ * (ns_ + nc_)];
        for (std::size_t i = 0; i < ns_; ++i) {
            row[i] = states[i];
        }
        for (std::size_t i = 0; i < nc_; ++i) {
            row[ns_ + i] = commands[i];
        }
        ++n_;
    }

    std::size_t size() const { return n_; }

    // CSV: i,t_mono_ns,period_ns,exec_ns,s0..,c0.. with doubles as C99 hex floats (exact).
    bool save(const std::string &path) const
    {
        std::FILE *f = std::fopen(path.c_str(), "w");
        if (f == nullptr) {
            return false;
        }
        std::fprintf(f, "i,t_mono_ns,period_ns,exec_ns");
        for (std::size_t i = 0; i < ns_; ++i) {
            std::fprintf(f, ",s%zu", i);
        }
        for (std::size_t i = 0; i < nc_; ++i) {
            std::fprintf(f, ",c%zu", i);
        }
        std::fprintf(f, "\n");
        for (std::size_t k = 0; k < n_; ++k) {
            std::fprintf(f, "%zu,%lld,%lld,%lld", k, static_cast<long long>(t_[k]),
                         static_cast<long long>(period_[k]), static_cast<long long>(exec_[k]));
            const double *row = &values_[k * (ns_ + nc_)];
            for (std::size_t i = 0; i < ns_ + nc_; ++i) {
                std::fprintf(f, ",%a", row[i]);
            }
            std::fprintf(f, "\n");
        }
        return std::fclose(f) == 0;
    }

private:
    std::size_t cap_ = 0, ns_ = 0, nc_ = 0, n_ = 0;
    std::vector<int64_t> t_, period_, exec_;
    std::vector<double> values_;
};

// A copapy program as a controller: states -> inputs, one tick, outputs -> commands.
class ControllerCore {
public:
    ControllerCore() = default;
    ControllerCore(const ControllerCore &) = delete;
    ControllerCore &operator=(const ControllerCore &) = delete;
    ~ControllerCore() { copapy_free(prog_); }

    // Loads the image (ticked every tick_ns: the controller's update period) and binds the
    // ports. False with *error set if anything does not fit. allow_code: also a format-1
    // image, which carries machine code (COPAPY_ALLOW_CODE: fault-containment tests only).
    bool configure(const std::string &image_path, int64_t tick_ns,
                   const std::vector<std::string> &state_ports,
                   const std::vector<std::string> &command_ports,
                   const std::vector<double> &safe, std::string *error,
                   bool allow_code = false)
    {
        copapy_free(prog_);
        prog_ = nullptr;
        if (copapy_abi_version() < COPAPY_ABI_VERSION) {  // a newer library keeps our prefix
            return fail(error, "libcopapy has ABI " + std::to_string(copapy_abi_version()) +
                        ", this controller was built for " + std::to_string(COPAPY_ABI_VERSION) +
                        " or later");
        }
        copapy_options opt{};
        opt.struct_size = sizeof opt;
        opt.tick_ns = tick_ns > 0 ? static_cast<uint64_t>(tick_ns) : 0u;
        opt.flags = allow_code ? static_cast<uint32_t>(COPAPY_ALLOW_CODE) : 0u;
        copapy_error err{};
        err.struct_size = sizeof err;
        if (copapy_load_file(image_path.c_str(), &opt, &prog_, &err) != COPAPY_OK) {
            return fail(error, std::string(err.name) + ": " + err.message);
        }
        states_.clear();
        commands_.clear();
        n_state_ = n_command_ = 0;
        if (!bind(state_ports, COPAPY_INPUT, "state", states_, n_state_, error) ||
            !bind(command_ports, COPAPY_OUTPUT, "command", commands_, n_command_, error)) {
            return false;
        }
        safe_ = safe;
        safe_.resize(n_command_, 0.0);
        faulted_ = false;
        return true;
    }

    std::size_t state_size() const { return n_state_; }
    std::size_t command_size() const { return n_command_; }
    bool faulted() const { return faulted_; }

    // states[0..state_size()) in, commands[0..command_size()) out. Returns false once the
    // program has faulted (commands are then the safe values).
    bool update(const double *states, double *commands)
    {
        if (!faulted_) {
            for (const Bound &b : states_) {
                copapy_write(prog_, b.port, states + b.at, b.count);
            }
            if (copapy_tick(prog_) == COPAPY_E_FAULTED) {
                faulted_ = true;
            }
        }
        if (faulted_) {
            for (std::size_t i = 0; i < n_command_; ++i) {
                commands[i] = safe_[i];
            }
            return false;
        }
        for (const Bound &b : commands_) {
            copapy_read(prog_, b.port, commands + b.at, b.count);
        }
        return true;
    }

    // What stopped the program ("" if it runs): kind, task, tick and pc of the fault the
    // runner core's guard caught (not real-time: for the log, once).
    std::string fault_text() const
    {
        copapy_fault f{};
        f.struct_size = sizeof f;
        if (prog_ == nullptr || copapy_get_fault(prog_, &f) != COPAPY_OK || f.kind == 0) {
            return "";
        }
        char buf[160];
        std::snprintf(buf, sizeof buf, "%s in task %u at tick %llu (pc 0x%llx, address 0x%llx)",
                      f.name, f.task, static_cast<unsigned long long>(f.tick),
                      static_cast<unsigned long long>(f.pc),
                      static_cast<unsigned long long>(f.address));
        return buf;
    }

    void reset()
    {
        copapy_reset(prog_);
        faulted_ = false;
    }

private:
    struct Bound {
        uint32_t port;
        uint32_t count;
        std::size_t at;
    };

    // The ports `names`, each of `role`, appended to `out` (n counts their elements).
    bool bind(const std::vector<std::string> &names, uint8_t role, const char *what,
              std::vector<Bound> &out, std::size_t &n, std::string *error) const
    {
        copapy_error err{};
        err.struct_size = sizeof err;
        for (const std::string &name : names) {
            copapy_port q = find(name, &err);
            if (q.struct_size == 0) {
                return fail(error, std::string(err.name) + ": " + err.message);
            }
            if (q.role != role) {
                return fail(error, std::string(what) + " port \"" + name + "\" is not " +
                            (role == COPAPY_INPUT ? "an input of the program" : "a task output"));
            }
            out.push_back({q.index, q.count, n});
            n += q.count;
        }
        return true;
    }

    copapy_port find(const std::string &name, copapy_error *err) const
    {
        copapy_port q{};
        q.struct_size = sizeof q;
        if (copapy_port_find(prog_, name.c_str(), &q, err) != COPAPY_OK) {
            q.struct_size = 0;
        }
        return q;
    }

    static bool fail(std::string *error, const std::string &message)
    {
        if (error != nullptr) {
            *error = message;
        }
        return false;
    }

    copapy_program *prog_ = nullptr;
    std::vector<Bound> states_, commands_;
    std::vector<double> safe_;
    std::size_t n_state_ = 0, n_command_ = 0;
    bool faulted_ = false;
};

// The trivial controller of the comparison: the same interfaces, a first-order step toward a
// target in plain C++ (what the copapy program costs is measured against this).
inline void passthrough_update(const double *states, double *commands, std::size_t n,
                               double gain, double target)
{
    for (std::size_t i = 0; i < n; ++i) {
        commands[i] = states[i] + gain * (target - states[i]);
    }
}

}  // namespace copapy_ros2_control

#endif  // COPAPY_ROS2_CONTROL_CONTROLLER_CORE_HPP
