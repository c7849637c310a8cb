"""pytest configuration: hypothesis profiles and the cost markers (the shared helpers are in
tests/support/)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=200, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev", max_examples=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# under qemu-user (tools/userland_test.sh) Python runs ~20x slower: fewer examples per property
settings.register_profile(
    "emulated", max_examples=10, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: what a test file costs beyond the in-process unit loop (measured with --durations=0 on
#: 2 cores; docs/architecture.md, "Tests"): ``emulator`` runs foreign code (unicorn, qemu),
#: ``firmware`` boots firmware in qemu/Renode or builds it, ``build`` compiles C or a wheel,
#: ``slow`` takes more than a few seconds in-process. Every other file is ``unit``.
COSTS: dict[str, tuple[str, ...]] = {
    "test_lanepack.py": ("slow",), "test_scheduler.py": ("slow",),
    "test_bench_jitter.py": ("slow",), "test_arrays.py": ("slow",), "test_ops.py": ("slow",),
    "test_faults_inprocess.py": ("slow",), "test_admission.py": ("slow",),
    "test_serial_target.py": ("slow",), "test_safety_host.py": ("slow",),
    "test_grad.py": ("slow",), "test_fold.py": ("slow",), "test_fused.py": ("slow",),
    "test_bench_soak.py": ("slow",), "test_cli.py": ("slow",), "test_saved.py": ("slow",),
    "test_typing.py": ("slow",), "test_tablefile.py": ("slow",),
    "test_lowering_order.py": ("slow",), "test_no_alloc.py": ("slow",),
    "test_sweep_dask.py": ("slow",), "test_scope.py": ("slow",),
    "test_scope_stall.py": ("slow",),
    "test_sweep_ray.py": ("slow",),
    "test_cross_arch.py": ("emulator",), "test_tricore.py": ("emulator",),
    "test_fori_loop_arch.py": ("emulator",),
    "test_qemu_backend.py": ("emulator",), "test_qemu_installed.py": ("emulator", "build"),
    "test_userland.py": ("emulator",), "test_array_ops_cross_arch.py": ("emulator",),
    "test_array_ops.py": ("slow",), "test_numpy_semantics.py": ("slow",),
    "test_runner_suite.py": ("firmware",), "test_safety_firmware.py": ("firmware",),
    "test_fw_isolation.py": ("firmware", "build"),
    "test_verified_loading_fw.py": ("firmware", "build"),
    "test_zephyr_build.py": ("firmware",), "test_zephyr_dac.py": ("firmware",),
    "test_zephyr_usermode.py": ("firmware",),
    "test_zephyr_renode_watchdog.py": ("firmware",), "test_fuzz_format2.py": ("build",),
    "test_wheel.py": ("build",), "test_array_stencils.py": ("build",),
    "test_stencil_tables.py": ("build",), "test_protocol_c.py": ("build",),
    "test_guide.py": ("build",), "test_math_kernels.py": ("build",),
    "test_vector_kernels.py": ("build",), "test_kits_control_loop.py": ("build",),
    "test_kits_ros2_control.py": ("build",),
    "test_windows.py": ("build", "emulator"), "test_macos_build.py": ("build",),
    "test_cross_wheels.py": ("build",),
    "test_ranges_examples.py": ("build", "slow"),
    "test_ranges_soundness.py": ("slow",),
    "test_linalg.py": ("slow",), "test_linalg_cross_arch.py": ("emulator",),
    "test_example_ekf.py": ("slow",), "test_example_lqr.py": ("slow",),
    "test_example_mpc.py": ("slow",), "test_example_ekf_runners.py": ("firmware",),
    "test_signal_shapes.py": ("build",), "test_keep_state.py": ("build",),
    "test_strided.py": ("slow",), "test_strided_cross_arch.py": ("emulator",),
    "test_strided_nd.py": ("slow",), "test_sort_stencil.py": ("slow",),
    "test_index_cross_arch.py": ("emulator",),
    "test_jit_large.py": ("slow",),
    "test_stencil_cpu_state.py": ("build",),
    "test_verified_loading_archs.py": ("emulator",),
    "test_cpu_state_caller.py": ("build",),
}
MARKERS = {
    "unit": "fast, in-process: the contributor loop (pytest -m unit, under a minute)",
    "emulator": "runs foreign machine code on unicorn or qemu",
    "firmware": "builds or boots firmware (qemu-system, Zephyr, Renode)",
    "build": "compiles C, the runner or a wheel",
    "slow": "takes more than a few seconds in-process",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test gets its file's cost markers, or ``unit``."""
    for item in items:
        costs = COSTS.get(item.path.name, ())
        for name in costs or ("unit",):
            item.add_marker(getattr(pytest.mark, name))
