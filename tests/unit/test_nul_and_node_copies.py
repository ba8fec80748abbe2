"""Where a NUL is found in nested data (its fast path must not miss one), and node copies that share nothing
a caller may add to."""

from __future__ import annotations

from trainyard.spec.nul import nul_at
from trainyard.spec.records import NodeCordon, NodeInfo


def test_nul_at_finds_a_nul_anywhere_and_nothing_where_there_is_none() -> None:
    assert nul_at({"a": [1, {"b": "x\x00y"}]}) == (("a", 1, "b"), "x\x00y")
    assert nul_at({"k\x00": 1}) == (("k\\x00",), "k\x00")
    assert nul_at(("ok", ["\x00"])) == ((1, 0), "\x00")
    assert nul_at("a\x00") == ((), "a\x00")
    # the text \x00 written out (a backslash, an x, two zeros) is no NUL
    assert nul_at({"a": "\\x00", "b": ["\\x00"]}) is None
    assert nul_at({"a": [1, 2.5, None, True], "b": {"c": "d"}}) is None


def test_a_fresh_node_copy_shares_no_list_or_dict_with_its_original() -> None:
    node = NodeInfo(name="n", cpu=4, memory=2**30, gpu=2, gpu_ids=["0", "1"], labels={"zone": "a"},
                    cordon=NodeCordon(at=1.0))
    copy = node.fresh(cpu_used=2.0)
    copy.gpus_used += ["0"]
    copy.gpu_holders["0"] = "job"
    copy.gpu_ids.append("2")
    copy.labels["zone"] = "b"
    assert (copy.cpu_used, node.cpu_used) == (2.0, 0.0)
    assert node.gpus_used == [] and node.gpu_holders == {} and node.gpu_ids == ["0", "1"]
    assert node.labels == {"zone": "a"} and copy.cordon == node.cordon
