// A loop that reproduces ros2_control_node's timing (controller_manager 4.26,
// ros2_control_node.cpp) without ROS, around the same controller code as the real plugin
// (copapy_ros2_control/controller_core.hpp) and a mock system like mock_components'
// GenericSystem (each joint's position state mirrors its command):
//   a thread with SCHED_FIFO at thread_priority (50, the node's kSchedPriority; 0: not set),
//   mlockall if lock_memory; period = 1 s / update_rate; next_iteration_time (system clock)
//   starts one period before now; each iteration: read, update, write, next += period,
//   std::this_thread::sleep_until(next) -- no overrun skip in 4.26: a late iteration is followed
//   by catch-up iterations until the grid is reached again.
// The wake-up latency of each iteration is (system clock at the top of the iteration) minus the
// deadline it slept to, as cyclictest measures it.
#ifndef COPAPY_KIT_ROS2_CONTROL_EMULATION_HPP
#define COPAPY_KIT_ROS2_CONTROL_EMULATION_HPP

#include <cstddef>
#include <string>
#include <cstdint>

namespace copapy_kit {

struct Ros2EmulationOptions {
    int update_rate = 1000;
    int thread_priority = 50;   // 0: stay SCHED_OTHER (what the node does when FIFO is denied)
    bool lock_memory = true;
    uint64_t cycles = 1000;
    uint64_t record_cycles = 0;
};

class Ros2ControlEmulation {
public:
    explicit Ros2ControlEmulation(int joints, double initial_position);
    ~Ros2ControlEmulation();
    Ros2ControlEmulation(const Ros2ControlEmulation &) = delete;
    Ros2ControlEmulation &operator=(const Ros2ControlEmulation &) = delete;

    // The copapy controller: the image and its ports (comma-separated, one state port per
    // joint position, one command port per joint). False with error() on failure. allow_code:
    // also a format-1 image (machine code; fault-containment tests only).
    bool use_copapy(const char *image_path, const char *state_ports, const char *command_ports,
                    int64_t tick_ns, bool allow_code = false);
    // The trivial controller (PassthroughController's update).
    void use_passthrough(double gain, double target);

    // Runs the cycles on a new thread as ros2_control_node does, and waits (release the GIL).
    int run(const Ros2EmulationOptions &options);

    uint64_t cycles() const;
    int policy() const;                // the loop thread's policy (SCHED_FIFO = 1)
    double position(int joint) const;  // the mock system's state after the run
    std::size_t latencies(int64_t *out, std::size_t n) const;  // ns, one per iteration
    bool save_record(const char *path) const;  // the controller's record (CSV, hex floats)
    const char *error() const;
    // The copapy program's fault after the run ("" if none): the commands were the safe
    // values (0) from that update on.
    std::string fault() const;

    struct Impl;

private:
    Impl *impl_;
};

}  // namespace copapy_kit

#endif  // COPAPY_KIT_ROS2_CONTROL_EMULATION_HPP
