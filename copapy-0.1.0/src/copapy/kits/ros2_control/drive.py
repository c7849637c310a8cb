"""Drives a running ros2_control_node for copapy.kits.ros2_control (run with the ROS 2
environment's Python; it imports rclpy, not copapy): publishes the robot description, loads,
configures and activates one controller over the controller_manager's services, lets it run,
deactivates it (the controller writes its record then) and prints one JSON line.

    python drive.py URDF CONTROLLER SECONDS
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import rclpy
from controller_manager_msgs.srv import ConfigureController, LoadController, SwitchController
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

CM = "/controller_manager"


class Driver(Node):  # type: ignore[misc]
    def __init__(self, urdf: str) -> None:
        super().__init__("copapy_kits_driver")
        qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                         reliability=ReliabilityPolicy.RELIABLE)
        self.description = self.create_publisher(String, "/robot_description", qos)
        self.description.publish(String(data=urdf))
        self.clients_ = {name: self.create_client(kind, f"{CM}/{name}") for name, kind in (
            ("load_controller", LoadController), ("configure_controller", ConfigureController),
            ("switch_controller", SwitchController))}

    def call(self, name: str, request: Any, timeout: float = 30.0) -> tuple[Any, float]:
        client = self.clients_[name]
        if not client.wait_for_service(timeout_sec=timeout):
            raise RuntimeError(f"{CM}/{name} is not available")
        t0 = time.monotonic()
        future = client.call_async(request)
        while not future.done():
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"{name} timed out")
            time.sleep(0.002)
        return future.result(), time.monotonic() - t0

    def switch(self, activate: tuple[str, ...] = (),
               deactivate: tuple[str, ...] = ()) -> float:
        request = SwitchController.Request(activate_controllers=list(activate),
                                           deactivate_controllers=list(deactivate),
                                           strictness=SwitchController.Request.STRICT)
        request.timeout.sec = 10
        result, seconds = self.call("switch_controller", request)
        if not result.ok:
            raise RuntimeError(f"switching +{list(activate)} -{list(deactivate)} failed")
        return float(seconds)


def main() -> int:
    urdf = open(sys.argv[1]).read()
    controller, seconds = sys.argv[2], float(sys.argv[3])
    rclpy.init()
    node = Driver(urdf)
    executor = MultiThreadedExecutor(2)
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    out: dict[str, Any] = {"controller": controller}
    try:
        result, out["load_s"] = node.call("load_controller",
                                          LoadController.Request(name=controller))
        if not result.ok:
            raise RuntimeError(f"loading {controller} failed (see the node's log)")
        result, out["configure_s"] = node.call("configure_controller",
                                               ConfigureController.Request(name=controller))
        if not result.ok:
            raise RuntimeError(f"configuring {controller} failed (see the node's log)")
        out["activate_s"] = node.switch(activate=(controller,))
        time.sleep(seconds)
        out["deactivate_s"] = node.switch(deactivate=(controller,))
        out["ok"] = True
    except RuntimeError as exc:
        out["ok"] = False
        out["error"] = str(exc)
    print(json.dumps(out), flush=True)
    executor.shutdown()
    node.destroy_node()
    rclpy.shutdown()
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
