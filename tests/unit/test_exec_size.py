"""What one exec takes, counted on the server with the secrets the launcher adds, against this machine's ARG_MAX
where the check runs on the node that execs."""

from __future__ import annotations

import os

import pytest

from trainyard.spec import exec_size
from trainyard.spec.exec_size import ARG_MAX, RESERVED, exec_size_problems, node_arg_max


@pytest.mark.parametrize("found, expected", [(ARG_MAX // 2, ARG_MAX // 2), (ARG_MAX * 4, ARG_MAX), (-1, ARG_MAX)],
                         ids=["a lowered stack limit", "a raised one: the spec's own bound", "unknown"])
def test_the_nodes_arg_max_is_its_own_where_smaller(monkeypatch, found, expected):
    monkeypatch.setattr(exec_size.os, "sysconf", lambda name: found if name == "SC_ARG_MAX" else os.sysconf(name))
    assert node_arg_max() == expected


def test_secrets_count_by_their_variable_and_are_never_shown():
    env = {f"V{i}": "y" * 100_000 for i in range(10)}  # 1 MB: fits alone
    assert exec_size_problems("true", {}, env) == []
    # past ARG_MAX with the secrets only: what to change is named secrets
    [(loc, message)] = exec_size_problems("true", {}, env, secrets={f"S{i}": 65536 for i in range(10)})
    assert loc == ("secrets",) and "command, env_vars, params and secrets together" in message
    # and against a node's smaller limit, what fits under the assumed one does not
    small = {"S": 100_000}
    assert exec_size_problems("true", {}, env, secrets=small) == []
    [(loc, message)] = exec_size_problems("true", {}, env, secrets=small, arg_max=RESERVED + 1_000_000)
    assert loc == ("secrets",) and f"ARG_MAX {RESERVED + 1_000_000:,}" in message
