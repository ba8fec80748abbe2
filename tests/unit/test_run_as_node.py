"""A node that lets users hard-link files they do not own (``fs.protected_hardlinks=0``) runs no job as an
account: its setup fails saying so, before root makes or hands over anything in the account's folders (where a
link to a file of root's would be captured, uploaded or chowned by name)."""

from __future__ import annotations

import pytest

from trainyard.launch import runas
from trainyard.launch.attempt_io import AttemptIO
from trainyard.launch.config import LaunchConfig
from trainyard.launch.prepare import SetupError


def _attempt(tmp_path, run_as):  # noqa: ANN001, ANN202
    a = AttemptIO()
    a.config = LaunchConfig(job_id="j-1", attempt_id="a-1", attempt=1, server="http://127.0.0.1:9",
                            command=["true"], run_as=run_as)
    a.dir, a.log, a.cancelled = tmp_path / "attempt", tmp_path / "attempt" / "output.log", None
    a.dir.mkdir()
    return a


@pytest.fixture
def hardlinks(tmp_path, monkeypatch):
    setting = tmp_path / "protected_hardlinks"
    monkeypatch.setattr(runas, "PROTECTED_HARDLINKS", setting)
    return setting


def test_an_accounts_job_is_refused_where_users_may_hard_link_others_files(tmp_path, hardlinks):
    hardlinks.write_text("0\n")
    with pytest.raises(SetupError, match=r"fs\.protected_hardlinks=0.*until it is 1"):
        _attempt(tmp_path, {"uid": 65534, "gid": 65534, "name": "nobody"})._prepare()
    assert not (tmp_path / "attempt" / "work").exists()  # refused before the work dir was made


@pytest.mark.parametrize("value", ["1\n", None])
def test_the_check_passes_where_the_kernel_protects_hard_links_or_there_is_no_such_setting(tmp_path, hardlinks, value):
    if value is not None:
        hardlinks.write_text(value)
    assert runas.node_problem() is None


def test_a_job_of_the_servers_own_account_is_not_held_to_it(tmp_path, hardlinks):
    hardlinks.write_text("0\n")
    env, work = _attempt(tmp_path, None)._prepare()  # root's own jobs may read root's files anyway
    assert work.is_dir()


@pytest.mark.parametrize("options, level", [("rw,nosuid,nodev,noexec,relatime", "warning"),
                                            ("rw,nosuid,relatime,hidepid=invisible", "ok"),
                                            ("rw,relatime,hidepid=2,gid=4", "ok")])
def test_doctor_says_whether_accounts_see_each_others_command_lines(tmp_path, monkeypatch, options, level):
    from trainyard.cli.doctor import _process_list

    mounts = tmp_path / "mounts"
    mounts.write_text(f"sysfs /sys sysfs rw 0 0\nproc /proc proc {options} 0 0\n")
    monkeypatch.setattr("os.geteuid", lambda: 0)
    found = _process_list(str(mounts))
    assert found.level == level, found
    assert ("hidepid=invisible" in found.fix) == (level == "warning")


def _user(name: str, os_user: str | None, *, admin: bool = False, disabled: bool = False,  # noqa: ANN202
          role: str = "member"):
    from trainyard.spec.identity import UserInfo

    return UserInfo(name=name, admin=admin, os_user=os_user, disabled=disabled, created_at=0,
                    teams={} if admin else {"vision": role})


def test_doctor_tells_an_admin_which_users_jobs_no_account_of_their_own_keeps_apart():
    from trainyard.cli.doctor import _user_accounts

    # given users mapped before each account had to be its own, one mapped to root, and one with no account
    users = [_user("ana", "s43ana"), _user("mal", "s43ana"), _user("rooty", "root"), _user("bob", None),
             _user("admin", None, admin=True), _user("gone", None, disabled=True), _user("vic", None, role="viewer")]
    found = _user_accounts(users, {"s43ana": 1008, "root": 0}.get)
    # then each is named, with why (an admin's jobs, a disabled user's and a viewer's are not in question)
    assert found.level == "warning", found
    assert "ana, mal share account s43ana" in found.found and "rooty" in found.found and "bob" in found.found
    assert not {"admin", "gone", "vic"} & set(found.found.replace(",", " ").replace(";", " ").split())
    assert "--os-user" in found.fix
    # and where each user has an account of its own, all is well
    assert _user_accounts([_user("ana", "s43ana"), _user("bob", "s43ben")], {"s43ana": 1008, "s43ben": 1009}.get
                          ).level == "ok"
