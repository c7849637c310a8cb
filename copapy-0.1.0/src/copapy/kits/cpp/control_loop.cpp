// copapy_kit::ControlLoop (copapy_kit/control_loop.hpp) over libcopapy's copapy_loop_run.
//
// Two sequence locks carry values between the loop thread and other threads without either side
// waiting for the other:
//   * the snapshot (loop thread writes, any thread reads): the loop bumps `seq` to odd, stores
//     every value (relaxed atomics), bumps it to even; a reader retries until it read the same
//     even `seq` before and after its loads;
//   * the parameters (other threads write under a mutex among themselves, the loop reads): the
//     loop takes a group only if `seq` is even, newer than what it applied, and unchanged after
//     its loads; otherwise it keeps the previous values for this cycle and looks again next.
// All values are doubles stored as their bits in std::atomic<uint64_t>, so there is no data race.
#include "copapy_kit/control_loop.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "copapy/copapy.h"

namespace copapy_kit {

namespace {

uint64_t bits_of(double d)
{
    uint64_t b;
    std::memcpy(&b, &d, sizeof b);
    return b;
}

double double_of(uint64_t b)
{
    double d;
    std::memcpy(&d, &b, sizeof d);
    return d;
}

constexpr uint32_t NO_PORT = 0xFFFFFFFFu;

struct Mapped {
    uint32_t port;
    uint32_t count;
    std::size_t at;  // first element in the loop's buffer
};

struct Atomics {
    std::unique_ptr<std::atomic<uint64_t>[]> v;
    std::size_t n = 0;
    void resize(std::size_t size)
    {
        v.reset(new std::atomic<uint64_t>[size > 0 ? size : 1]);
        n = size;
        for (std::size_t i = 0; i < (size > 0 ? size : 1); ++i) {
            v[i].store(0, std::memory_order_relaxed);
        }
    }
};

}  // namespace

struct ControlLoop::Impl {
    copapy_program *prog = nullptr;
    Hardware *hw = nullptr;
    std::vector<Mapped> states, commands, params;
    std::vector<double> safe;
    std::size_t n_state = 0, n_command = 0, n_param = 0;

    // what the loop thread uses (preallocated before start)
    std::vector<double> state_buf, command_buf, param_cur, tmp;
    std::vector<int64_t> latency;
    std::vector<double> trace;
    std::size_t trace_rows = 0, width = 0;
    double period_s = 1e-3;

    // snapshot of every input and output port
    std::map<std::string, Mapped> snap_index;
    Atomics snap;
    std::vector<Mapped> snap_ports;
    std::atomic<uint64_t> snap_seq{0};
    std::atomic<uint64_t> snap_cycle{0};

    // parameters written by other threads
    std::mutex param_mutex;
    Atomics param_in;
    std::atomic<uint64_t> param_seq{0};
    uint64_t param_applied = 0;  // loop thread only

    // the run
    LoopOptions options;
    copapy_loop_config cfg{};
    copapy_loop_stats lstats{};
    copapy_error lerr{};
    int32_t stop_flag = 0;
    std::thread thread;
    std::atomic<bool> finished{true};
    std::atomic<uint64_t> generation{0};
    std::atomic<bool> hook_failed{false};
    // the fault, copied by the loop thread in the cycle it appears (then published)
    copapy_fault fault_rec{};
    std::atomic<bool> fault_ready{false};

    std::string error, error_name;
    uint32_t error_code = 0;

    int fail(int status, const std::string &message, const char *name = nullptr)
    {
        error = message;
        error_name = name != nullptr ? name : copapy_status_name(status);
        error_code = 0;
        return status;
    }

    int fail_from(const copapy_error &e)
    {
        error = e.message;
        error_name = e.name;
        error_code = e.code;
        return e.status;
    }

    bool loaded() const { return prog != nullptr; }
    bool is_running() const { return !finished.load(std::memory_order_acquire); }

    int find(const char *name, copapy_port &q)
    {
        copapy_error e{};
        e.struct_size = sizeof e;
        q = copapy_port{};
        q.struct_size = sizeof q;
        if (!loaded()) {
            return fail(COPAPY_E_ARGUMENT, "no program loaded: call load() first");
        }
        if (copapy_port_find(prog, name != nullptr ? name : "", &q, &e) != COPAPY_OK) {
            return fail_from(e);
        }
        return COPAPY_OK;
    }

    // The port `name` of role `role` for add_state/add_command/add_parameter; false (error
    // set) if the loop runs, the port is missing or has another role.
    bool mappable(const char *name, uint8_t role, const char *what, copapy_port &q)
    {
        if (is_running()) {
            fail(COPAPY_E_ARGUMENT, std::string(what) + " while the loop runs: stop() it first");
            return false;
        }
        if (find(name, q) != COPAPY_OK) {
            return false;
        }
        if (q.role != role) {
            fail(role == COPAPY_INPUT ? COPAPY_E_READ_ONLY : COPAPY_E_ARGUMENT,
                 std::string(what) + ": port \"" + name + "\" is not " +
                 (role == COPAPY_INPUT ? "an input of the program (a cp.value)"
                                       : "an output of a task"));
            return false;
        }
        return true;
    }

    // ---- the loop thread

    // a hook: a C++ exception from the hardware ends the loop (it must not unwind through C)
    static int guarded(void *ctx, uint64_t cycle, int (Impl::*step)(uint64_t), const char *what)
    {
        auto *self = static_cast<Impl *>(ctx);
        try {
            return (self->*step)(cycle);
        } catch (const std::exception &ex) {
            self->hook_error(std::string(what) + " threw: " + ex.what());
        } catch (...) {
            self->hook_error(std::string(what) + " threw a non-std exception");
        }
        return 1;
    }

    static int before(void *ctx, uint64_t cycle, int64_t)
    {
        return guarded(ctx, cycle, &Impl::read_inputs, "Hardware::read");
    }

    static int after(void *ctx, uint64_t cycle, int64_t)
    {
        return guarded(ctx, cycle, &Impl::write_outputs, "Hardware::write");
    }

    void hook_error(const std::string &what)
    {
        // read by other threads only after the loop has ended (finished is released after it)
        error = what;
        error_name = "HARDWARE";
        hook_failed.store(true, std::memory_order_relaxed);
    }

    int read_inputs(uint64_t cycle)
    {
        double t = static_cast<double>(cycle) * period_s;
        if (hw != nullptr && n_state > 0) {
            hw->read(t, state_buf.data(), n_state);
        }
        for (const Mapped &m : states) {
            if (m.port != NO_PORT) {
                copapy_write(prog, m.port, &state_buf[m.at], m.count);
            }
        }
        if (n_param > 0) {
            uint64_t s1 = param_seq.load(std::memory_order_acquire);
            if ((s1 & 1u) == 0 && s1 != param_applied) {
                for (std::size_t i = 0; i < n_param; ++i) {
                    tmp[i] = double_of(param_in.v[i].load(std::memory_order_relaxed));
                }
                std::atomic_thread_fence(std::memory_order_acquire);
                if (param_seq.load(std::memory_order_relaxed) == s1) {
                    std::copy(tmp.begin(), tmp.begin() + static_cast<long>(n_param),
                              param_cur.begin());
                    param_applied = s1;
                    for (const Mapped &m : params) {
                        copapy_write(prog, m.port, &param_cur[m.at], m.count);
                    }
                }
            }
        }
        return 0;
    }

    int write_outputs(uint64_t cycle)
    {
        bool faulted = __atomic_load_n(&lstats.status, __ATOMIC_RELAXED) == COPAPY_E_FAULTED;
        if (faulted && !fault_ready.load(std::memory_order_relaxed)) {
            fault_rec.struct_size = sizeof fault_rec;
            copapy_get_fault(prog, &fault_rec);
            fault_ready.store(true, std::memory_order_release);
        }
        for (std::size_t c = 0; c < commands.size(); ++c) {
            const Mapped &m = commands[c];
            if (faulted) {
                std::fill(command_buf.begin() + static_cast<long>(m.at),
                          command_buf.begin() + static_cast<long>(m.at + m.count), safe[c]);
            } else {
                copapy_read(prog, m.port, &command_buf[m.at], m.count);
            }
        }
        double t = static_cast<double>(cycle) * period_s;
        if (hw != nullptr && n_command > 0) {
            hw->write(t, command_buf.data(), n_command);
        }
        // snapshot
        uint64_t s = snap_seq.load(std::memory_order_relaxed);
        snap_seq.store(s + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        for (const Mapped &m : snap_ports) {
            copapy_read(prog, m.port, tmp.data(), m.count);
            for (uint32_t i = 0; i < m.count; ++i) {
                snap.v[m.at + i].store(bits_of(tmp[i]), std::memory_order_relaxed);
            }
        }
        snap_cycle.store(cycle + 1, std::memory_order_relaxed);
        snap_seq.store(s + 2, std::memory_order_release);
        if (trace_rows < options.trace_capacity) {
            double *row = &trace[trace_rows * width];
            std::copy(state_buf.begin(), state_buf.begin() + static_cast<long>(n_state), row);
            std::copy(param_cur.begin(), param_cur.begin() + static_cast<long>(n_param),
                      row + n_state);
            std::copy(command_buf.begin(), command_buf.begin() + static_cast<long>(n_command),
                      row + n_state + n_param);
            ++trace_rows;
        }
        return 0;
    }
};

ControlLoop::ControlLoop() : impl_(new Impl) {}

ControlLoop::~ControlLoop()
{
    stop();
    copapy_free(impl_->prog);
    delete impl_;
}

int ControlLoop::load(const char *image, std::size_t len, uint32_t flags, int64_t tick_ns)
{
    Impl &m = *impl_;
    if (m.is_running()) {
        return m.fail(COPAPY_E_ARGUMENT, "load() while the loop runs: stop() it first");
    }
    copapy_options opt{};
    opt.struct_size = sizeof opt;
    opt.flags = flags;
    opt.tick_ns = tick_ns > 0 ? static_cast<uint64_t>(tick_ns) : 0u;
    copapy_error e{};
    e.struct_size = sizeof e;
    copapy_program *p = nullptr;
    if (copapy_load(image, len, &opt, &p, &e) != COPAPY_OK) {
        return m.fail_from(e);
    }
    copapy_free(m.prog);
    m.prog = p;
    m.fault_ready.store(false);
    m.states.clear();
    m.commands.clear();
    m.params.clear();
    m.safe.clear();
    m.n_state = m.n_command = m.n_param = 0;
    m.snap_index.clear();
    m.snap_ports.clear();
    std::size_t at = 0;
    for (uint32_t i = 0; i < copapy_port_count(p); ++i) {
        copapy_port q{};
        q.struct_size = sizeof q;
        copapy_port_at(p, i, &q);
        if (q.role == COPAPY_INPUT || q.role == COPAPY_OUTPUT) {
            Mapped mp{q.index, q.count, at};
            m.snap_ports.push_back(mp);
            m.snap_index.emplace(q.name, mp);
            at += q.count;
        }
    }
    m.snap.resize(at);
    m.snap_seq.store(0);
    m.snap_cycle.store(0);
    return COPAPY_OK;
}

int ControlLoop::add_state(const char *port)
{
    Impl &m = *impl_;
    copapy_port q;
    if (port != nullptr && port[0] == '\0' && m.loaded() && !m.is_running()) {
        // a state the program does not use: one value read and dropped
        m.states.push_back({NO_PORT, 1, m.n_state});
        m.n_state += 1;
        return static_cast<int>(m.states.size() - 1);
    }
    if (!m.mappable(port, COPAPY_INPUT, "add_state()", q)) {
        return -1;
    }
    m.states.push_back({q.index, q.count, m.n_state});
    m.n_state += q.count;
    return static_cast<int>(m.states.size() - 1);
}

int ControlLoop::add_command(const char *port, double safe)
{
    Impl &m = *impl_;
    copapy_port q;
    if (!m.mappable(port, COPAPY_OUTPUT, "add_command()", q)) {
        return -1;
    }
    m.commands.push_back({q.index, q.count, m.n_command});
    m.safe.push_back(safe);
    m.n_command += q.count;
    return static_cast<int>(m.commands.size() - 1);
}

int ControlLoop::add_parameter(const char *port)
{
    Impl &m = *impl_;
    copapy_port q;
    if (!m.mappable(port, COPAPY_INPUT, "add_parameter()", q)) {
        return -1;
    }
    std::lock_guard<std::mutex> lock(m.param_mutex);
    m.params.push_back({q.index, q.count, m.n_param});
    m.n_param += q.count;
    // the current values, so a parameter never written keeps the program's initial value
    std::vector<double> cur(m.n_param);
    for (const Mapped &p : m.params) {
        copapy_read(m.prog, p.port, &cur[p.at], p.count);
    }
    m.param_in.resize(m.n_param);
    for (std::size_t i = 0; i < m.n_param; ++i) {
        m.param_in.v[i].store(bits_of(cur[i]), std::memory_order_relaxed);
    }
    m.param_cur = cur;
    return static_cast<int>(m.params.size() - 1);
}

int64_t ControlLoop::tick_ns() const
{
    return static_cast<int64_t>(copapy_tick_ns(impl_->prog));
}

std::size_t ControlLoop::state_size() const { return impl_->n_state; }
std::size_t ControlLoop::command_size() const { return impl_->n_command; }
std::size_t ControlLoop::parameter_size() const { return impl_->n_param; }
std::size_t ControlLoop::trace_width() const
{
    return impl_->n_state + impl_->n_param + impl_->n_command;
}

void ControlLoop::set_hardware(Hardware *hardware)
{
    if (!impl_->is_running()) {
        impl_->hw = hardware;
    }
}

int ControlLoop::start(const LoopOptions &options)
{
    Impl &m = *impl_;
    if (!m.loaded()) {
        return m.fail(COPAPY_E_ARGUMENT, "no program loaded: call load() first");
    }
    if (m.is_running()) {
        return m.fail(COPAPY_E_ARGUMENT, "the loop is already running: stop() it first");
    }
    if (m.thread.joinable()) {
        m.thread.join();  // a run that ended by itself
    }
    if (options.period_ns <= 0) {
        return m.fail(COPAPY_E_ARGUMENT, "period_ns must be > 0");
    }
    if (static_cast<uint64_t>(options.period_ns) != copapy_tick_ns(m.prog)) {
        return m.fail(COPAPY_E_ARGUMENT,
                      "period_ns differs from the program's tick: load the image with "
                      "tick_ns = period_ns (one cycle is one tick)");
    }
    m.options = options;
    m.period_s = static_cast<double>(options.period_ns) * 1e-9;
    m.state_buf.assign(m.n_state, 0.0);
    m.command_buf.assign(m.n_command, 0.0);
    m.param_cur.resize(m.n_param, 0.0);
    std::size_t widest = m.n_param;
    for (const Mapped &p : m.snap_ports) {
        widest = std::max<std::size_t>(widest, p.count);
    }
    m.tmp.assign(widest > 0 ? widest : 1, 0.0);
    m.latency.assign(options.latency_capacity > 0 ? options.latency_capacity : 1, 0);
    m.width = m.n_state + m.n_param + m.n_command;
    m.trace.assign(options.trace_capacity * m.width, 0.0);
    m.trace_rows = 0;
    m.param_applied = 0;  // apply the parameters (written or initial) at the first cycle
    {
        std::lock_guard<std::mutex> lock(m.param_mutex);
        uint64_t s = m.param_seq.load(std::memory_order_relaxed);
        if (s == 0) {
            m.param_seq.store(2, std::memory_order_release);
        }
    }
    m.hook_failed.store(false);
    m.fault_ready.store(false);
    m.error.clear();
    m.error_name.clear();

    m.cfg = copapy_loop_config{};
    m.cfg.struct_size = sizeof m.cfg;
    uint32_t flags = 0;
    flags |= options.fifo ? uint32_t{COPAPY_LOOP_FIFO} : 0u;
    flags |= options.mlock ? uint32_t{COPAPY_LOOP_MLOCK} : 0u;
    flags |= options.slack1 ? uint32_t{COPAPY_LOOP_SLACK1} : 0u;
    flags |= options.dma_latency0 ? uint32_t{COPAPY_LOOP_DMA_LATENCY0} : 0u;
    m.cfg.flags = flags;
    m.cfg.period_ns = static_cast<uint64_t>(options.period_ns);
    m.cfg.cycles = options.cycles;
    m.cfg.priority = options.priority;
    m.cfg.cpu = options.cpu;
    m.cfg.program = m.prog;
    m.cfg.stop = &m.stop_flag;
    m.cfg.before = &Impl::before;
    m.cfg.after = &Impl::after;
    m.cfg.ctx = &m;
    m.cfg.latency_ns = m.latency.data();
    m.cfg.latency_capacity = m.latency.size();
    m.lstats = copapy_loop_stats{};
    m.lstats.struct_size = sizeof m.lstats;
    m.lerr = copapy_error{};
    m.lerr.struct_size = sizeof m.lerr;
    __atomic_store_n(&m.stop_flag, 0, __ATOMIC_RELEASE);
    m.generation.fetch_add(1);
    m.finished.store(false, std::memory_order_release);
    try {
        m.thread = std::thread([&m] {
            copapy_loop_run(&m.cfg, &m.lstats, &m.lerr);
            m.finished.store(true, std::memory_order_release);
        });
    } catch (const std::exception &ex) {
        m.finished.store(true);
        return m.fail(COPAPY_E_SYSTEM, std::string("cannot start the loop thread: ") + ex.what());
    }
    return COPAPY_OK;
}

int ControlLoop::stop()
{
    Impl &m = *impl_;
    __atomic_store_n(&m.stop_flag, 1, __ATOMIC_RELEASE);
    if (m.thread.joinable()) {
        m.thread.join();
    }
    return COPAPY_OK;
}

int ControlLoop::wait(double timeout_s)
{
    Impl &m = *impl_;
    auto until = std::chrono::steady_clock::now() +
                 std::chrono::duration<double>(timeout_s > 0 ? timeout_s : 0.0);
    while (m.is_running()) {
        if (std::chrono::steady_clock::now() >= until) {
            return 1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (m.thread.joinable()) {
        m.thread.join();
    }
    return 0;
}

bool ControlLoop::running() const { return impl_->is_running(); }

int ControlLoop::reset()
{
    Impl &m = *impl_;
    if (m.is_running()) {
        return m.fail(COPAPY_E_ARGUMENT, "reset() while the loop runs: stop() it first");
    }
    if (!m.loaded()) {
        return m.fail(COPAPY_E_ARGUMENT, "no program loaded");
    }
    copapy_reset(m.prog);
    m.fault_ready.store(false);
    return COPAPY_OK;
}

int ControlLoop::write_parameter(int parameter, const double *values, std::size_t n)
{
    Impl &m = *impl_;
    if (parameter < 0 || static_cast<std::size_t>(parameter) >= m.params.size() ||
        values == nullptr || n == 0 || n > m.params[static_cast<std::size_t>(parameter)].count) {
        return COPAPY_E_ARGUMENT;
    }
    const Mapped &p = m.params[static_cast<std::size_t>(parameter)];
    std::lock_guard<std::mutex> lock(m.param_mutex);
    uint64_t s = m.param_seq.load(std::memory_order_relaxed);
    m.param_seq.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    for (std::size_t i = 0; i < n; ++i) {
        m.param_in.v[p.at + i].store(bits_of(values[i]), std::memory_order_relaxed);
    }
    m.param_seq.store(s + 2, std::memory_order_release);
    if (!m.is_running()) {
        // not running: also straight into the program, so read_port shows it
        copapy_write(m.prog, p.port, values, static_cast<uint32_t>(n));
    }
    return COPAPY_OK;
}

int ControlLoop::read_port(const char *port, double *values, std::size_t n,
                           uint64_t *cycle) const
{
    const Impl &m = *impl_;
    auto it = m.snap_index.find(port != nullptr ? port : "");
    if (it == m.snap_index.end()) {
        return COPAPY_E_NO_PORT;
    }
    const Mapped &p = it->second;
    if (values == nullptr || n == 0 || n > p.count) {
        return COPAPY_E_ARGUMENT;
    }
    if (!m.is_running()) {
        // no loop thread: the program itself (the last cycle's values, or written since)
        copapy_read(m.prog, p.port, values, static_cast<uint32_t>(n));
        if (cycle != nullptr) {
            *cycle = m.snap_cycle.load(std::memory_order_relaxed);
        }
        return COPAPY_OK;
    }
    for (unsigned tries = 0;; ++tries) {
        uint64_t s1 = m.snap_seq.load(std::memory_order_acquire);
        if ((s1 & 1u) == 0) {
            for (std::size_t i = 0; i < n; ++i) {
                values[i] = double_of(m.snap.v[p.at + i].load(std::memory_order_relaxed));
            }
            uint64_t c = m.snap_cycle.load(std::memory_order_relaxed);
            std::atomic_thread_fence(std::memory_order_acquire);
            if (m.snap_seq.load(std::memory_order_relaxed) == s1) {
                if (cycle != nullptr) {
                    *cycle = c;
                }
                return COPAPY_OK;
            }
        }
        if (tries > 64) {
            std::this_thread::yield();
        }
    }
}

LoopStats ControlLoop::stats() const
{
    const Impl &m = *impl_;
    const copapy_loop_stats &s = m.lstats;
    LoopStats out;
    out.cycles = __atomic_load_n(&s.cycles, __ATOMIC_RELAXED);
    out.missed = __atomic_load_n(&s.missed, __ATOMIC_RELAXED);
    out.overruns = __atomic_load_n(&s.overruns, __ATOMIC_RELAXED);
    out.latency_min_ns = out.cycles > 0 ? __atomic_load_n(&s.latency_min_ns, __ATOMIC_RELAXED) : 0;
    out.latency_max_ns = __atomic_load_n(&s.latency_max_ns, __ATOMIC_RELAXED);
    int64_t sum = __atomic_load_n(&s.latency_sum_ns, __ATOMIC_RELAXED);
    out.latency_mean_ns = out.cycles > 0 ? static_cast<double>(sum) / static_cast<double>(out.cycles)
                                         : 0.0;
    out.work_max_ns = __atomic_load_n(&s.work_max_ns, __ATOMIC_RELAXED);
    out.status = __atomic_load_n(&s.status, __ATOMIC_RELAXED);
    out.rt = __atomic_load_n(&s.rt, __ATOMIC_RELAXED);
    out.running = m.is_running();
    out.generation = m.generation.load();
    return out;
}

FaultRecord ControlLoop::fault() const
{
    const Impl &m = *impl_;
    FaultRecord out;
    copapy_fault f{};
    f.struct_size = sizeof f;
    if (m.fault_ready.load(std::memory_order_acquire)) {
        f = m.fault_rec;  // written once, before fault_ready
    } else if (m.is_running() || m.prog == nullptr ||
               copapy_get_fault(m.prog, &f) != COPAPY_OK) {
        return out;
    }
    if (f.kind == 0) {
        return out;
    }
    out.kind = f.kind;
    out.task = f.task;
    out.code = f.code;
    out.address = f.address;
    out.pc = f.pc;
    out.tick = f.tick;
    out.name = f.name;
    return out;
}

std::size_t ControlLoop::latencies(int64_t *out, std::size_t n) const
{
    const Impl &m = *impl_;
    if (m.is_running() || out == nullptr || m.latency.empty()) {
        return 0;
    }
    uint64_t cycles = m.lstats.cycles;
    std::size_t cap = m.latency.size();
    std::size_t have = static_cast<std::size_t>(std::min<uint64_t>(cycles, cap));
    std::size_t k = std::min(n, have);
    for (std::size_t i = 0; i < k; ++i) {
        uint64_t c = cycles - k + i;  // oldest first
        out[i] = m.latency[c % cap];
    }
    return k;
}

std::size_t ControlLoop::trace(double *out, std::size_t rows) const
{
    const Impl &m = *impl_;
    if (m.is_running() || out == nullptr) {
        return 0;
    }
    std::size_t k = std::min(rows, m.trace_rows);
    std::copy(m.trace.begin(), m.trace.begin() + static_cast<long>(k * m.width), out);
    return k;
}

const char *ControlLoop::error() const { return impl_->error.c_str(); }
const char *ControlLoop::error_name() const { return impl_->error_name.c_str(); }
uint32_t ControlLoop::error_code() const { return impl_->error_code; }

}  // namespace copapy_kit
