"""Hash-consed nodes die with their last user: the intern table holds them weakly, and its key
(which names the operand nodes) goes with them, so it keeps no operand alive either."""

from __future__ import annotations

import gc
import weakref

import copapy as cp
from copapy.graph import node as node_module


def test_structurally_equal_nodes_are_one_object() -> None:
    x = cp.value(1.5)
    assert (x * 2.0 + 1.0).node is (x * 2.0 + 1.0).node


def test_a_node_and_its_intern_entry_go_with_the_last_user() -> None:
    x = cp.value(1.5)
    gc.collect()  # nodes kept only by earlier tests' cyclic garbage die now, not mid-test
    before = len(node_module._interned)
    y = x * 3.0 + 0.25
    product = weakref.ref(y.node.args[0] if y.node.args[0].op == "mul" else y.node.args[1])
    total = weakref.ref(y.node)
    assert len(node_module._interned) > before
    del y
    assert total() is None and product() is None  # reference counting alone frees them
    assert len(node_module._interned) == before
    leaf = weakref.ref(x.node)
    del x
    assert leaf() is None  # no intern key of a dead user kept the operand alive


def test_a_rebuilt_node_after_collection_is_equivalent() -> None:
    x = cp.value(2.0)
    fingerprint = (x * 5.0).node.fingerprint
    assert (x * 5.0).node.fingerprint == fingerprint
