"""The local engine's batch launch: one attempt that cannot start does not stop the others."""

from __future__ import annotations

from tests.contract.rigs import EXIT_CODE, LocalRig
from trainyard.engines.base import Launch


def test_an_attempt_that_cannot_start_gets_its_error_and_the_others_start(tmp_path):
    rig = LocalRig(tmp_path)
    try:
        # given three attempts, the middle one's folder blocked by a file where its attempt dir goes
        attempts = [rig.attempt(f"batch{i}") for i in range(3)]
        blocked = rig.engine.replica_dir(attempts[1].id, 0).parent
        blocked.parent.mkdir(parents=True, exist_ok=True)
        blocked.write_text("not a folder")

        # when they are launched together
        found = rig.engine.launch_many([Launch(a, *rig.launch_args(a)) for a in attempts])
        rig.launched += [attempts[0], attempts[2]]

        # then the middle one's place holds its error, and the others run to their end
        assert isinstance(found[1], OSError)
        assert [found[0]["replicas"][0]["pid"] > 0, found[2]["replicas"][0]["pid"] > 0] == [True, True]
        for a in (attempts[0], attempts[2]):
            rig.end(a)
            assert rig.wait_for(a, "exited").result.exit_code == EXIT_CODE
        assert rig.observe(attempts[1]).state == "not_launched"
    finally:
        rig.close()
