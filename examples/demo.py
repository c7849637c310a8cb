"""copapy demo: trace a small computation in Python, compile it to machine code, run it.

    python examples/demo.py
"""

from __future__ import annotations

import math
import time
import timeit

import copapy as cp

# Two-link planar arm: where is the tool tip, how far from the target, and which way to turn?
theta1 = cp.value(0.3, name="theta1")
theta2 = cp.value(1.1, name="theta2")
target_x, target_y = 1.2, 0.9
l1, l2 = 1.0, 0.8

tip_x = l1 * cp.cos(theta1) + l2 * cp.cos(theta1 + theta2)
tip_y = l1 * cp.sin(theta1) + l2 * cp.sin(theta1 + theta2)
distance = cp.sqrt((tip_x - target_x) ** 2 + (tip_y - target_y) ** 2)
reachable = distance < 0.05
heading = cp.atan2(target_y - tip_y, target_x - tip_x)

tg = cp.LocalTarget()
t0 = time.perf_counter()
tg.compile(tip_x, tip_y, distance, reachable, heading)
compile_ms = (time.perf_counter() - t0) * 1e3
info = tg.program_info

print(f"compiled for {tg.arch}: {info.op_count} operations -> {info.stencil_count} stencils, "
      f"{info.code_bytes} bytes of machine code, in {compile_ms:.1f} ms")

for angles in [(0.3, 1.1), (0.2, 1.3), (0.35, 0.95)]:
    tg.write(theta1, angles[0])
    tg.write(theta2, angles[1])
    tg.run()
    px = l1 * math.cos(angles[0]) + l2 * math.cos(angles[0] + angles[1])
    py = l1 * math.sin(angles[0]) + l2 * math.sin(angles[0] + angles[1])
    print(f"theta=({angles[0]:.2f}, {angles[1]:.2f})  tip=({tg.read(tip_x):.5f}, "
          f"{tg.read(tip_y):.5f})  [Python float64: ({px:.5f}, {py:.5f})]  "
          f"distance={tg.read(distance):.4f}  reachable={tg.read(reachable)}  "
          f"heading={tg.read(heading):+.4f} rad")

n = 200_000
per_run = min(timeit.repeat(tg.run, number=n, repeat=5)) / n
print(f"one run of the compiled program from Python: {per_run * 1e9:.0f} ns")
