// Simulated plants for ControlLoop demos and tests: a DC motor and a planar multi-joint arm.
// Both integrate with a fixed step per cycle (semi-implicit Euler in `substeps` sub-steps), so
// a run is reproducible whatever the loop's timing. Compiled into the control-loop kit library.
#ifndef COPAPY_KIT_PLANTS_HPP
#define COPAPY_KIT_PLANTS_HPP

#include <cstddef>

#include "copapy_kit/hardware.hpp"

namespace copapy_kit {

// Voltage-driven DC motor:  L di/dt = V - R i - K w,  J dw/dt = K i - b w - load,  dθ/dt = w.
// state: [angle (rad), velocity (rad/s), current (A)]; command: [voltage (V)], clamped to
// +-v_max. Defaults: a small 12 V motor (R 1 Ω, L 0.5 mH, K 0.05 N·m/A, J 1e-4 kg·m²).
class DCMotor : public Hardware {
public:
    explicit DCMotor(double dt, int substeps = 20);
    void read(double t, double *state, std::size_t n) override;
    void write(double t, const double *command, std::size_t n) override;
    void reset();

    double R = 1.0, L = 0.5e-3, K = 0.05, J = 1e-4, b = 1e-5, load = 0.0, v_max = 12.0;
    double angle = 0.0, velocity = 0.0, current = 0.0;
    double voltage = 0.0;  // the last command applied

private:
    double dt_;
    int substeps_;
};

// Planar arm of n <= 8 revolute joints in a vertical plane (gravity along -y), torque-driven:
// I_i q''_i = tau_i - b q'_i - G_i(q), with G_i the gravity torque of links i..n-1 about joint
// i and a constant diagonal inertia I_i (the arm stretched out); simplified but coupled
// through gravity. state: [q_0..q_{n-1}, q'_0..q'_{n-1}]; command: [tau_0..tau_{n-1}] (N·m),
// clamped to +-tau_max.
class Arm : public Hardware {
public:
    static constexpr int MAX_JOINTS = 8;
    Arm(int joints, double dt, int substeps = 10);
    void read(double t, double *state, std::size_t n) override;
    void write(double t, const double *command, std::size_t n) override;
    void reset();
    int joints() const { return n_; }
    double gravity_torque(int joint) const;

    double mass[MAX_JOINTS];    // kg per link (default 1)
    double length[MAX_JOINTS];  // m per link (default 0.3)
    double damping = 0.05, g = 9.81, tau_max = 50.0;
    double q[MAX_JOINTS];
    double qd[MAX_JOINTS];
    double tau[MAX_JOINTS];     // the last command applied

private:
    double inertia(int joint) const;
    int n_;
    double dt_;
    int substeps_;
};

}  // namespace copapy_kit

#endif  // COPAPY_KIT_PLANTS_HPP
