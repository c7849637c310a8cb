// Simulated plants (copapy_kit/plants.hpp).
#include "copapy_kit/plants.hpp"

#include <cmath>

namespace copapy_kit {

static double clamp(double v, double lim)
{
    return v > lim ? lim : (v < -lim ? -lim : v);
}

DCMotor::DCMotor(double dt, int substeps) : dt_(dt), substeps_(substeps > 0 ? substeps : 1) {}

void DCMotor::reset()
{
    angle = velocity = current = voltage = 0.0;
}

void DCMotor::read(double, double *state, std::size_t n)
{
    const double s[3] = {angle, velocity, current};
    for (std::size_t i = 0; i < n && i < 3; ++i) {
        state[i] = s[i];
    }
}

void DCMotor::write(double, const double *command, std::size_t n)
{
    voltage = n > 0 ? clamp(command[0], v_max) : 0.0;
    if (voltage != voltage) {
        voltage = 0.0;  // NaN: no drive
    }
    const double h = dt_ / substeps_;
    for (int k = 0; k < substeps_; ++k) {
        current += h * (voltage - R * current - K * velocity) / L;
        velocity += h * (K * current - b * velocity - load) / J;
        angle += h * velocity;
    }
}

Arm::Arm(int joints, double dt, int substeps)
    : n_(joints < 1 ? 1 : (joints > MAX_JOINTS ? MAX_JOINTS : joints)), dt_(dt),
      substeps_(substeps > 0 ? substeps : 1)
{
    for (int i = 0; i < MAX_JOINTS; ++i) {
        mass[i] = 1.0;
        length[i] = 0.3;
    }
    reset();
}

void Arm::reset()
{
    for (int i = 0; i < MAX_JOINTS; ++i) {
        q[i] = qd[i] = tau[i] = 0.0;
    }
}

double Arm::inertia(int i) const
{
    // links i..n-1 stretched out, point masses at their centres
    double I = 0.0, r = 0.0;
    for (int k = i; k < n_; ++k) {
        double c = r + 0.5 * length[k];
        I += mass[k] * (c * c + length[k] * length[k] / 12.0);
        r += length[k];
    }
    return I;
}

double Arm::gravity_torque(int i) const
{
    double G = 0.0;
    for (int k = i; k < n_; ++k) {
        // horizontal distance from joint i to the centre of link k
        double x = 0.0, phi = 0.0;
        for (int j = 0; j < i; ++j) {
            phi += q[j];
        }
        for (int j = i; j <= k; ++j) {
            phi += q[j];
            x += (j < k ? length[j] : 0.5 * length[j]) * std::cos(phi);
        }
        G += mass[k] * g * x;
    }
    return G;
}

void Arm::read(double, double *state, std::size_t n)
{
    for (std::size_t i = 0; i < n && i < static_cast<std::size_t>(2 * n_); ++i) {
        state[i] = i < static_cast<std::size_t>(n_) ? q[i] : qd[i - n_];
    }
}

void Arm::write(double, const double *command, std::size_t n)
{
    for (int i = 0; i < n_; ++i) {
        double t = static_cast<std::size_t>(i) < n ? clamp(command[i], tau_max) : 0.0;
        tau[i] = t == t ? t : 0.0;
    }
    const double h = dt_ / substeps_;
    for (int s = 0; s < substeps_; ++s) {
        double acc[MAX_JOINTS];
        for (int i = 0; i < n_; ++i) {
            acc[i] = (tau[i] - damping * qd[i] - gravity_torque(i)) / inertia(i);
        }
        for (int i = 0; i < n_; ++i) {
            qd[i] += h * acc[i];
            q[i] += h * qd[i];
        }
    }
}

}  // namespace copapy_kit
