// copapy_kit::ControlLoop: a periodic C++ loop on its own thread that runs a copapy program
// through the runner library (libcopapy, copapy/copapy.h). Each cycle:
//   hardware.read -> the program's state inputs, pending parameter writes -> their inputs,
//   copapy_tick (the tasks released now run, LET applied), outputs -> hardware.write,
//   a snapshot of every input and output for readers on other threads.
// The timing is copapy_loop_run's: absolute deadlines on CLOCK_MONOTONIC, optional SCHED_FIFO,
// mlockall, timer slack 1 ns and cpu_dma_latency 0, and the overrun skip of cyclictest and
// ros2_control. Another thread (Python with the GIL released, or any C++ thread) starts and
// stops it, writes parameters and reads snapshots and statistics while it runs: writes and
// snapshots go through sequence locks, so a reader never sees a torn group of values and the
// loop thread never waits for a reader or a writer.
//
// The class is a pointer to its implementation (compiled into the kit library by g++), so the
// declarations cppyy parses are small and its layout does not depend on the compiler.
#ifndef COPAPY_KIT_CONTROL_LOOP_HPP
#define COPAPY_KIT_CONTROL_LOOP_HPP

#include <cstddef>
#include <cstdint>

#include <string>

#include "copapy_kit/hardware.hpp"

namespace copapy_kit {

struct LoopOptions {
    int64_t period_ns = 1000000;    // also the program's tick
    uint64_t cycles = 0;            // stop by itself after this many cycles (0: run until stop())
    bool fifo = false;              // SCHED_FIFO at `priority`
    int priority = 80;
    bool mlock = false;             // mlockall(MCL_CURRENT | MCL_FUTURE), process-wide
    bool slack1 = true;             // timer slack 1 ns for the loop thread
    bool dma_latency0 = false;      // hold /dev/cpu_dma_latency at 0 while running
    int cpu = -1;                   // pin the loop thread (-1: no pinning)
    uint64_t latency_capacity = 1u << 16;  // wake-up latencies kept (a ring, newest kept)
    uint64_t trace_capacity = 0;    // cycles whose states, parameters and commands are recorded
};

struct LoopStats {
    uint64_t cycles = 0;
    uint64_t missed = 0;            // deadlines skipped after a late cycle
    uint64_t overruns = 0;          // cycles that ended after the next deadline
    int64_t latency_min_ns = 0;
    int64_t latency_max_ns = 0;
    double latency_mean_ns = 0.0;
    int64_t work_max_ns = 0;        // the longest read + tick + write
    int32_t status = 0;             // copapy_status of the loop (7 FAULTED: safe commands out)
    uint32_t rt = 0;                // COPAPY_RT_* the set-up achieved
    bool running = false;
    uint64_t generation = 0;        // runs started so far
};

// The fault that stopped the program (copapy_get_fault); kind 0: none.
struct FaultRecord {
    uint32_t kind = 0;              // COPAPY_FAULT_* (1 SIGSEGV ... 9 timeout)
    uint32_t task = 0xFFFFFFFFu;
    uint32_t code = 0;              // si_code
    uint64_t address = 0;
    uint64_t pc = 0;
    uint64_t tick = 0;
    std::string name = "none";      // "SIGSEGV", "timeout", ...
};

class ControlLoop {
public:
    ControlLoop();
    ~ControlLoop();  // stops a running loop
    ControlLoop(const ControlLoop &) = delete;
    ControlLoop &operator=(const ControlLoop &) = delete;

    // Loads a program image (ticked every period_ns; flags: copapy_options.flags, e.g.
    // COPAPY_DETERMINISTIC). Returns a copapy_status; error()/error_name()/error_code() say why.
    int load(const char *image, std::size_t len, uint32_t flags, int64_t tick_ns);

    // The mapping, before start(): hardware state values fill the state ports in the order
    // added (a port of n elements takes n values); command values come from the command ports
    // (safe: the command while faulted); parameters are inputs written with
    // write_parameter(). Each returns its index or -1 (error() names the problem).
    // add_state("") takes one hardware value the program does not use (it is dropped).
    int add_state(const char *port);
    int add_command(const char *port, double safe);
    int add_parameter(const char *port);
    int64_t tick_ns() const;           // the program's tick = the loop's period
    std::size_t state_size() const;    // values per hardware read
    std::size_t command_size() const;  // values per hardware write

    void set_hardware(Hardware *hardware);  // not owned; must outlive the run

    int start(const LoopOptions &options);  // starts the thread (copapy_status)
    int stop();                              // asks the loop to stop and joins it
    int wait(double timeout_s);             // joins a loop that stops by itself (1: still running)
    bool running() const;
    // Back to the program's initial state (time 0, inputs, state); not while running.
    int reset();

    // Any thread, any time: the value goes to the program at the next cycle (a group of n
    // elements lands in one cycle). Returns a copapy_status.
    int write_parameter(int parameter, const double *values, std::size_t n);
    // The latest snapshot of a port (an input or output; n <= its element count), taken after
    // cycle *cycle. Returns a copapy_status (3 NO_PORT: not an input or output).
    int read_port(const char *port, double *values, std::size_t n, uint64_t *cycle) const;

    LoopStats stats() const;
    // Any thread, any time: the program's fault (the loop stops ticking it and commands the
    // safe values from that cycle on; reset() clears it).
    FaultRecord fault() const;
    // After the loop has ended: the newest n wake-up latencies (ns, oldest first) and the
    // recorded trace rows (states | parameters | commands per cycle). Return the count copied.
    std::size_t latencies(int64_t *out, std::size_t n) const;
    std::size_t trace(double *out, std::size_t rows) const;
    std::size_t trace_width() const;
    // Parameter port elements in trace order (for replaying a trace).
    std::size_t parameter_size() const;

    const char *error() const;
    const char *error_name() const;
    uint32_t error_code() const;

    struct Impl;

private:
    Impl *impl_;
};

}  // namespace copapy_kit

#endif  // COPAPY_KIT_CONTROL_LOOP_HPP
