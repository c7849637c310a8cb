// copapy_ros2_control: controller_interface::ControllerInterface plugins for ros2_control's
// controller_manager.
//
//   copapy_ros2_control/CopapyController   update() runs a copapy program image through the
//                                          runner library (libcopapy): the claimed state
//                                          interfaces feed its state ports, its command ports
//                                          drive the claimed command interfaces.
//   copapy_ros2_control/PassthroughController  the trivial controller of the same shape (a
//                                          first-order step in plain C++), for comparisons.
//
// Both claim their interfaces by name (INDIVIDUAL), never allocate in update(), and can record
// every cycle (record_cycles > 0) into record_path at deactivation.
#include <algorithm>
#include <string>
#include <vector>

#include "controller_interface/controller_interface.hpp"
#include "copapy_ros2_control/controller_core.hpp"
#include "pluginlib/class_list_macros.hpp"

namespace copapy_ros2_control {

using controller_interface::CallbackReturn;
using controller_interface::InterfaceConfiguration;
using controller_interface::interface_configuration_type;
using controller_interface::return_type;

// What both controllers share: the interface names, their order, the record.
class RecordingController : public controller_interface::ControllerInterface {
public:
    CallbackReturn on_init() override
    {
        auto_declare<std::vector<std::string>>("state_interfaces", {});
        auto_declare<std::vector<std::string>>("command_interfaces", {});
        auto_declare<std::string>("record_path", "");
        auto_declare<int>("record_cycles", 0);
        declare_more();
        return CallbackReturn::SUCCESS;
    }

    InterfaceConfiguration command_interface_configuration() const override
    {
        return {interface_configuration_type::INDIVIDUAL, command_names_};
    }

    InterfaceConfiguration state_interface_configuration() const override
    {
        return {interface_configuration_type::INDIVIDUAL, state_names_};
    }

    CallbackReturn on_configure(const rclcpp_lifecycle::State &) override
    {
        auto node = get_node();
        state_names_ = node->get_parameter("state_interfaces").as_string_array();
        command_names_ = node->get_parameter("command_interfaces").as_string_array();
        record_path_ = node->get_parameter("record_path").as_string();
        record_cycles_ = static_cast<std::size_t>(
            std::max<int64_t>(0, node->get_parameter("record_cycles").as_int()));
        if (command_names_.empty()) {
            RCLCPP_ERROR(node->get_logger(), "parameter 'command_interfaces' is empty");
            return CallbackReturn::ERROR;
        }
        std::string error;
        if (!configure_more(&error)) {
            RCLCPP_ERROR(node->get_logger(), "%s", error.c_str());
            return CallbackReturn::ERROR;
        }
        states_.assign(state_names_.size(), 0.0);
        commands_.assign(command_names_.size(), 0.0);
        return CallbackReturn::SUCCESS;
    }

    CallbackReturn on_activate(const rclcpp_lifecycle::State &) override
    {
        // the loaned interfaces in the order of the names (whatever order the manager used)
        state_at_.clear();
        command_at_.clear();
        for (const std::string &name : state_names_) {
            state_at_.push_back(index_of(state_interfaces_, name));
        }
        for (const std::string &name : command_names_) {
            command_at_.push_back(index_of(command_interfaces_, name));
        }
        if (std::count(state_at_.begin(), state_at_.end(), SIZE_MAX) +
                std::count(command_at_.begin(), command_at_.end(), SIZE_MAX) > 0) {
            RCLCPP_ERROR(get_node()->get_logger(), "a claimed interface was not loaned");
            return CallbackReturn::ERROR;
        }
        record_.reserve(record_cycles_, states_.size(), commands_.size());
        RCLCPP_INFO(get_node()->get_logger(), "active: %zu state and %zu command interfaces",
                    state_at_.size(), command_at_.size());
        return CallbackReturn::SUCCESS;
    }

    CallbackReturn on_deactivate(const rclcpp_lifecycle::State &) override
    {
        if (!record_path_.empty() && record_cycles_ > 0) {
            if (record_.save(record_path_)) {
                RCLCPP_INFO(get_node()->get_logger(), "recorded %zu cycles to %s",
                            record_.size(), record_path_.c_str());
            } else {
                RCLCPP_ERROR(get_node()->get_logger(), "cannot write %s", record_path_.c_str());
            }
        }
        return CallbackReturn::SUCCESS;
    }

    return_type update(const rclcpp::Time &, const rclcpp::Duration &period) override
    {
        const int64_t t0 = monotonic_ns();
        for (std::size_t i = 0; i < state_at_.size(); ++i) {
            states_[i] = state_interfaces_[state_at_[i]].get_value();
        }
        compute();
        for (std::size_t i = 0; i < command_at_.size(); ++i) {
            (void)command_interfaces_[command_at_[i]].set_value(commands_[i]);
        }
        if (record_cycles_ > 0) {
            record_.add(t0, period.nanoseconds(), monotonic_ns() - t0, states_.data(),
                        commands_.data());
        }
        return return_type::OK;
    }

protected:
    virtual void declare_more() {}
    virtual bool configure_more(std::string *error) = 0;
    virtual void compute() = 0;

    std::vector<double> states_, commands_;

private:
    template <typename Loaned>
    static std::size_t index_of(const std::vector<Loaned> &loaned, const std::string &name)
    {
        for (std::size_t i = 0; i < loaned.size(); ++i) {
            if (loaned[i].get_name() == name) {
                return i;
            }
        }
        return SIZE_MAX;
    }

    std::vector<std::string> state_names_, command_names_;
    std::vector<std::size_t> state_at_, command_at_;
    std::string record_path_;
    std::size_t record_cycles_ = 0;
    Recorder record_;
};

class CopapyController : public RecordingController {
protected:
    void declare_more() override
    {
        auto_declare<std::string>("image", "");
        auto_declare<std::vector<std::string>>("state_ports", {});
        auto_declare<std::vector<std::string>>("command_ports", {});
        auto_declare<std::vector<double>>("safe_commands", {});
        auto_declare<bool>("allow_code", false);  // fault-containment tests only
    }

    bool configure_more(std::string *error) override
    {
        auto node = get_node();
        const std::string image = node->get_parameter("image").as_string();
        const auto state_ports = node->get_parameter("state_ports").as_string_array();
        const auto command_ports = node->get_parameter("command_ports").as_string_array();
        const auto safe = node->get_parameter("safe_commands").as_double_array();
        const bool allow_code = node->get_parameter("allow_code").as_bool();
        if (image.empty()) {
            *error = "parameter 'image' (a saved copapy program, .cpim) is empty";
            return false;
        }
        const unsigned rate = get_update_rate();
        const int64_t tick_ns = rate > 0 ? 1000000000LL / rate : 0;
        if (!core_.configure(image, tick_ns, state_ports, command_ports, safe, error,
                             allow_code)) {
            return false;
        }
        const std::size_t ns = node->get_parameter("state_interfaces").as_string_array().size();
        const std::size_t nc = node->get_parameter("command_interfaces").as_string_array().size();
        if (core_.state_size() != ns || core_.command_size() != nc) {
            *error = "the state ports take " + std::to_string(core_.state_size()) +
                     " values and the command ports give " + std::to_string(core_.command_size()) +
                     ", but " + std::to_string(ns) + " state and " + std::to_string(nc) +
                     " command interfaces are claimed";
            return false;
        }
        RCLCPP_INFO(node->get_logger(), "copapy program %s: tick %lld ns, %zu states, %zu commands",
                    image.c_str(), static_cast<long long>(tick_ns), ns, nc);
        return true;
    }

    void compute() override
    {
        if (!core_.update(states_.data(), commands_.data()) && !reported_) {
            reported_ = true;  // once; the safe commands go out every cycle from now on
            RCLCPP_ERROR(get_node()->get_logger(),
                         "the copapy program faulted: %s; commanding the safe values",
                         core_.fault_text().c_str());
        }
    }

private:
    ControllerCore core_;
    bool reported_ = false;
};

class PassthroughController : public RecordingController {
protected:
    void declare_more() override
    {
        auto_declare<double>("gain", 0.01);
        auto_declare<double>("target", 1.0);
    }

    bool configure_more(std::string *error) override
    {
        gain_ = get_node()->get_parameter("gain").as_double();
        target_ = get_node()->get_parameter("target").as_double();
        const std::size_t ns = get_node()->get_parameter("state_interfaces").as_string_array().size();
        const std::size_t nc =
            get_node()->get_parameter("command_interfaces").as_string_array().size();
        if (ns != nc) {
            *error = "PassthroughController needs as many state as command interfaces";
            return false;
        }
        return true;
    }

    void compute() override
    {
        passthrough_update(states_.data(), commands_.data(), commands_.size(), gain_, target_);
    }

private:
    double gain_ = 0.01, target_ = 1.0;
};

}  // namespace copapy_ros2_control

PLUGINLIB_EXPORT_CLASS(copapy_ros2_control::CopapyController,
                       controller_interface::ControllerInterface)
PLUGINLIB_EXPORT_CLASS(copapy_ros2_control::PassthroughController,
                       controller_interface::ControllerInterface)
