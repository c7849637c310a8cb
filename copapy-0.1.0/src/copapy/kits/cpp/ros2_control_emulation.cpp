// copapy_kit::Ros2ControlEmulation (copapy_kit/ros2_control_emulation.hpp).
#include "copapy_kit/ros2_control_emulation.hpp"

#include <sched.h>
#include <sys/mman.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "copapy_ros2_control/controller_core.hpp"

namespace copapy_kit {

namespace {

std::vector<std::string> split(const char *csv)
{
    std::vector<std::string> out;
    std::stringstream in(csv != nullptr ? csv : "");
    std::string item;
    while (std::getline(in, item, ',')) {
        if (!item.empty()) {
            out.push_back(item);
        }
    }
    return out;
}

}  // namespace

struct Ros2ControlEmulation::Impl {
    int joints;
    std::vector<double> state, command, states_in, commands_out;
    bool copapy = false;
    copapy_ros2_control::ControllerCore core;
    copapy_ros2_control::Recorder record;
    double gain = 0.01, target = 1.0;
    std::vector<int64_t> latency;
    uint64_t done = 0;
    int policy = -1;
    std::string error;

    // mock_components/GenericSystem: the position state follows the command once one is set
    void read()
    {
        for (int i = 0; i < joints; ++i) {
            if (!std::isnan(command[static_cast<std::size_t>(i)])) {
                state[static_cast<std::size_t>(i)] = command[static_cast<std::size_t>(i)];
            }
        }
    }

    // the controller's update(): read the loaned states, compute, set the commands
    void update(int64_t period_ns)
    {
        const int64_t t0 = copapy_ros2_control::monotonic_ns();
        for (std::size_t i = 0; i < state.size(); ++i) {
            states_in[i] = state[i];
        }
        if (copapy) {
            core.update(states_in.data(), commands_out.data());
        } else {
            copapy_ros2_control::passthrough_update(states_in.data(), commands_out.data(),
                                                    commands_out.size(), gain, target);
        }
        for (std::size_t i = 0; i < command.size(); ++i) {
            command[i] = commands_out[i];
        }
        record.add(t0, period_ns, copapy_ros2_control::monotonic_ns() - t0, states_in.data(),
                   commands_out.data());
    }

    void write() {}  // GenericSystem's write does nothing

    void loop(const Ros2EmulationOptions &o)
    {
        if (o.thread_priority > 0) {
            sched_param sp{};
            sp.sched_priority = o.thread_priority;
            (void)sched_setscheduler(0, SCHED_FIFO, &sp);  // realtime_tools::configure_sched_fifo
        }
        policy = sched_getscheduler(0);
        using system_clock = std::chrono::system_clock;
        auto const period = std::chrono::nanoseconds(1'000'000'000 / o.update_rate);
        auto const cm_now = std::chrono::duration_cast<std::chrono::nanoseconds>(
            system_clock::now().time_since_epoch());
        std::chrono::time_point<system_clock, std::chrono::nanoseconds> next_iteration_time{
            cm_now - period};
        auto previous_time = system_clock::now() - period;
        for (uint64_t k = 0; k < o.cycles; ++k) {
            auto const current_time = system_clock::now();
            latency[k] = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             current_time - next_iteration_time).count();
            auto const measured_period = current_time - previous_time;
            previous_time = current_time;
            read();
            update(std::chrono::duration_cast<std::chrono::nanoseconds>(measured_period).count());
            write();
            next_iteration_time += period;
            std::this_thread::sleep_until(next_iteration_time);
            done = k + 1;
        }
    }
};

Ros2ControlEmulation::Ros2ControlEmulation(int joints, double initial_position)
    : impl_(new Impl)
{
    Impl &m = *impl_;
    m.joints = joints > 0 ? joints : 1;
    const auto n = static_cast<std::size_t>(m.joints);
    m.state.assign(n, initial_position);
    m.command.assign(n, std::numeric_limits<double>::quiet_NaN());
    m.states_in.assign(n, 0.0);
    m.commands_out.assign(n, 0.0);
}

Ros2ControlEmulation::~Ros2ControlEmulation() { delete impl_; }

bool Ros2ControlEmulation::use_copapy(const char *image_path, const char *state_ports,
                                      const char *command_ports, int64_t tick_ns,
                                      bool allow_code)
{
    Impl &m = *impl_;
    std::vector<std::string> s = split(state_ports), c = split(command_ports);
    if (!m.core.configure(image_path != nullptr ? image_path : "", tick_ns, s, c, {}, &m.error,
                          allow_code)) {
        return false;
    }
    if (m.core.state_size() != static_cast<std::size_t>(m.joints) ||
        m.core.command_size() != static_cast<std::size_t>(m.joints)) {
        m.error = "the ports take " + std::to_string(m.core.state_size()) + " states and give " +
                  std::to_string(m.core.command_size()) + " commands for " +
                  std::to_string(m.joints) + " joints";
        return false;
    }
    m.copapy = true;
    return true;
}

void Ros2ControlEmulation::use_passthrough(double gain, double target)
{
    impl_->copapy = false;
    impl_->gain = gain;
    impl_->target = target;
}

int Ros2ControlEmulation::run(const Ros2EmulationOptions &options)
{
    Impl &m = *impl_;
    if (options.update_rate <= 0) {
        m.error = "update_rate must be > 0";
        return 1;
    }
    if (options.lock_memory) {
        (void)mlockall(MCL_CURRENT | MCL_FUTURE);  // realtime_tools::lock_memory
    }
    m.latency.assign(options.cycles > 0 ? options.cycles : 1, 0);
    m.record.reserve(options.record_cycles, m.state.size(), m.command.size());
    m.done = 0;
    std::thread cm_thread([&m, options] { m.loop(options); });
    cm_thread.join();
    return 0;
}

uint64_t Ros2ControlEmulation::cycles() const { return impl_->done; }
int Ros2ControlEmulation::policy() const { return impl_->policy; }

double Ros2ControlEmulation::position(int joint) const
{
    return joint >= 0 && joint < impl_->joints ? impl_->state[static_cast<std::size_t>(joint)]
                                               : 0.0;
}

std::size_t Ros2ControlEmulation::latencies(int64_t *out, std::size_t n) const
{
    std::size_t k = std::min<std::size_t>(n, static_cast<std::size_t>(impl_->done));
    for (std::size_t i = 0; i < k; ++i) {
        out[i] = impl_->latency[i];
    }
    return k;
}

bool Ros2ControlEmulation::save_record(const char *path) const
{
    return impl_->record.save(path != nullptr ? path : "");
}

const char *Ros2ControlEmulation::error() const { return impl_->error.c_str(); }

std::string Ros2ControlEmulation::fault() const
{
    return impl_->copapy ? impl_->core.fault_text() : std::string();
}

}  // namespace copapy_kit
