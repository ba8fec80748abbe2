"""launch/fdlimit.py: a process raises its soft open-file limit to the hard one, and one it starts to run jobs puts
back the limit it was given (each in its own process here: the test's own limits stay as they are)."""

import os
import resource
import subprocess
import sys

CHILD = """
import os, resource, subprocess, sys
from trainyard.launch import fdlimit
print(fdlimit.raise_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0], os.environ.get("TRAINYARD_NOFILE_SOFT"))
print(fdlimit.raise_limit())  # already raised: nothing to do
sys.stdout.flush()
subprocess.run([sys.executable, "-c", "import os, resource; from trainyard.launch import fdlimit; "
                "fdlimit.restore_limit(); print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], "
                "os.environ.get('TRAINYARD_NOFILE_SOFT'))"], check=True)
"""


def _run(soft: int) -> list[str]:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    env = {k: v for k, v in os.environ.items() if k != "TRAINYARD_NOFILE_SOFT"}
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, check=True,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)))
    return out.stdout.splitlines()


def test_the_soft_limit_goes_up_to_the_hard_one_and_back_down_for_what_runs_jobs():
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    top = 1 << 20 if hard == resource.RLIM_INFINITY else min(hard, 1 << 20)
    assert _run(200) == [f"(200, {top}) {top} 200", "None", "200 None"]


def test_a_soft_limit_already_at_the_hard_one_is_left_alone_and_nothing_is_noted():
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    top = 1 << 20 if hard == resource.RLIM_INFINITY else min(hard, 1 << 20)
    assert _run(top) == [f"None {top} None", "None", f"{top} None"]
