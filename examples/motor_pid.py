"""PID position control of a simulated DC motor, in simulated time.

Two periodic tasks on one LocalTarget, connected only through I/O channels:

* plant (10 kHz): a DC motor driven by the PWM duty cycle; its shaft angle is written to the
  encoder channel (counts);
* controller (1 kHz): reads the encoder, runs a PID loop with anti-windup, writes the PWM.

    python examples/motor_pid.py            # prints the step response, writes motor_pid.png
    python examples/motor_pid.py --save pid.cpimg   # the same program as a saved image
"""

from __future__ import annotations

import math
import sys

import copapy as cp

COUNTS_PER_RAD = 1000.0 / (2 * math.pi)  # a 1000-count encoder
SUPPLY_V = 12.0


Param = float | cp.Value[float]


def motor_plant(duty: cp.Value[float], resistance: Param = 2.0, kt: Param = 0.05,
                ke: Param = 0.05, inertia: Param = 2e-5, friction: Param = 1e-5
                ) -> cp.Value[float]:
    """Shaft angle (counts) of a small DC motor: J dω/dt = Kt·i − b·ω, i = (V − Ke·ω)/R."""
    voltage = SUPPLY_V * cp.clamp(duty, -1.0, 1.0)

    def speed_update(omega: cp.Value[float]) -> cp.Value[float]:
        current = (voltage - ke * omega) / resistance
        return omega + (kt * current - friction * omega) / inertia * cp.dt

    omega = cp.feedback(speed_update, init=0.0)
    return cp.integrate(omega) * COUNTS_PER_RAD


def pid_controller(setpoint: cp.Value[float], counts: cp.Value[float], kp: Param = 0.004,
                   ki: Param = 0.02, kd: Param = 0.00008) -> cp.Value[float]:
    """Duty cycle from the angle error: PID, integrating only near the setpoint (anti-windup)."""
    error = setpoint - counts
    integral = cp.feedback(
        lambda prev: cp.where(abs(error) < 10.0, cp.clamp(prev + error * cp.dt, -5.0, 5.0), prev),
        init=0.0)
    duty = kp * error + ki * integral + kd * cp.rate(error)
    return cp.clamp(duty, -1.0, 1.0)


def program(setpoint0: float = 0.0) -> tuple[list[cp.Task],
                                            list[tuple[cp.Value[float], cp.io.Channel]],
                                            dict[str, cp.Value[float]]]:
    """The two tasks, their I/O bindings and the named values (what simulate() deploys and
    ``--save`` writes)."""
    setpoint = cp.value(setpoint0, name="setpoint")
    encoder_in = cp.value(0.0, name="encoder")
    duty_in = cp.value(0.0, name="duty")

    duty = pid_controller(setpoint, encoder_in)
    angle = motor_plant(duty_in)
    bindings = [
        (encoder_in, cp.io.Encoder(0)),  # controller reads the encoder
        (duty, cp.io.PWM(0)),  # controller drives the PWM
        (duty_in, cp.io.plant(cp.io.PWM(0))),  # the simulated motor reads the PWM
        (angle, cp.io.plant(cp.io.Encoder(0))),  # ... and moves the encoder
    ]
    tasks = [cp.Task(duty, period=1e-3, priority=0, name="controller"),
             cp.Task(angle, period=1e-4, priority=1, name="plant")]
    return tasks, bindings, {"setpoint": setpoint, "angle": angle, "pwm": duty}


def encoder_noise(seed: cp.Value[float], amplitude: cp.Value[float]) -> cp.Value[float]:
    """Sensor noise in [-amplitude/2, amplitude/2) counts from a Park-Miller generator started
    at ``seed`` (1 .. 2**31 - 2): float64 arithmetic, exact, so every CPU draws the same."""
    modulus = 2147483647.0
    state = cp.feedback(lambda s: cp.where(cp.first_run(), seed, s * 16807.0 % modulus),
                        init=1.0)
    return (state / modulus - 0.5) * amplitude


def sweep_program() -> tuple[list[cp.Task], list[tuple[cp.Value[float], cp.io.Channel]],
                             dict[str, cp.Value[float]]]:
    """program() with the gains, the plant's resistance, inertia and friction and the
    encoder noise (seed, amplitude) as inputs: what docs/guide/howto/sweeps.md sweeps."""
    setpoint = cp.value(500.0, name="setpoint")
    gains = {k: cp.value(v, name=k) for k, v in (("kp", 0.004), ("ki", 0.02), ("kd", 0.00008))}
    plant = {k: cp.value(v, name=k) for k, v in (("resistance", 2.0), ("inertia", 2e-5),
                                                 ("friction", 1e-5))}
    seed, noise = cp.value(1.0, name="seed"), cp.value(0.0, name="noise")
    encoder_in = cp.value(0.0, name="encoder")
    duty_in = cp.value(0.0, name="duty")

    duty = pid_controller(setpoint, encoder_in, **gains)
    angle = motor_plant(duty_in, **plant)
    measured = angle + encoder_noise(seed, noise)
    bindings = [(encoder_in, cp.io.Encoder(0)), (duty, cp.io.PWM(0)),
                (duty_in, cp.io.plant(cp.io.PWM(0))), (measured, cp.io.plant(cp.io.Encoder(0)))]
    tasks = [cp.Task(duty, period=1e-3, priority=0, name="controller"),
             cp.Task(angle, measured, period=1e-4, priority=1, name="plant")]
    return tasks, bindings, {"setpoint": setpoint, "angle": angle, "pwm": duty, **gains,
                             **plant, "seed": seed, "noise": noise}


def simulate(seconds: float = 0.6, arch: str | None = None) -> tuple[cp.LocalTarget, dict[str, object]]:
    tasks, bindings, named = program()
    setpoint, angle, duty = named["setpoint"], named["angle"], named["pwm"]
    tg = cp.LocalTarget(arch, tick=1e-4)
    for value, channel in bindings:
        tg.bind(value, channel)
    tg.deploy(*tasks)
    trace = tg.trace(setpoint, angle, duty)
    tg.write(setpoint, 500.0)  # half a turn
    tg.step(seconds)
    final = tg.read(angle)
    return tg, {"trace": trace, "setpoint": setpoint, "angle": angle, "duty": duty,
                "final": final}


def save(path: str, setpoint: float = 500.0) -> cp.Program:
    """The controller and the simulated motor as a saved program: ``copapy run`` and
    ``copapy-runner --image`` run it without this script (ports: setpoint, angle, pwm)."""
    tasks, bindings, named = program(setpoint)
    return cp.save(path, *tasks, bindings=bindings, names=named)


def main() -> int:
    if sys.argv[1:2] == ["--save"]:
        prog = save(sys.argv[2])
        print(f"saved {prog}")
        return 0
    tg, r = simulate()
    final = float(r["final"])  # type: ignore[arg-type]
    trace = r["trace"]
    t = trace.time  # type: ignore[attr-defined]
    angle = trace[r["angle"]]  # type: ignore[index]
    inside = abs(angle - 500.0) <= 5.0
    settle = next((t[i] for i in range(len(t)) if inside[i:].all()), float("nan"))
    print(f"final angle {final:.2f} counts (setpoint 500), settled to ±1 % after {settle:.3f} s, "
          f"overshoot {max(angle.max() - 500.0, 0) / 5:.1f} %")
    for s in tg.stats():
        print(f"  {s.name}: {s.runs} runs, {s.skipped} skipped, {s.overruns} overruns, "
              f"mean {s.mean_exec_ns:.0f} ns per run")
    path = sys.argv[1] if len(sys.argv) > 1 else "motor_pid.png"
    tg.plot(r["setpoint"], r["angle"], labels=["setpoint [counts]", "angle [counts]"],  # type: ignore[list-item]
            path=path, title="PID position control of a DC motor (simulated time)")
    print(f"plot written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
