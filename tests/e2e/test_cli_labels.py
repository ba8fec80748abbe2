"""Labels end to end: `trainyard run --label`, `ls --label` (selectors), `show`, the API's ``label`` filter;
`ls --sort`."""

import json

import httpx
import pytest

pytestmark = pytest.mark.slow


def test_jobs_are_tagged_listed_by_label_shown_and_bad_labels_are_named(server):
    ann = server.cli("run", "--label", "exp=lbl-base", "-l", "team.example.com/owner=ann", "--", "true")
    bob = server.cli("run", "-l", "exp=lbl-base", "-l", "team.example.com/owner=bob", "--", "true")
    other = server.cli("run", "-l", "exp=lbl-other", "--", "true")
    assert [r.returncode for r in (ann, bob, other)] == [0, 0, 0], ann.stderr
    ann, bob, other = ann.stdout.strip(), bob.stdout.strip(), other.stdout.strip()

    assert server.cli("ls", "-l", "exp=lbl-base", "--ids").stdout.split() == [bob, ann]
    both = server.cli("ls", "-l", "exp=lbl-base", "--label", "team.example.com/owner=ann", "--ids")
    assert both.stdout.split() == [ann]
    assert server.cli("ls", "-l", "exp=lbl-none", "--ids").stdout == ""
    # a pipe gets whole rows (no COLUMNS: pytest-xdist's workers set 80, which the CLI would follow)
    shown = server.cli("ls", "-l", "exp=lbl-base", "--show-labels", env={"COLUMNS": ""}).stdout.splitlines()
    assert shown[0].split()[-1] == "LABELS" and shown[2].split()[-1] == "exp=lbl-base,team.example.com/owner=ann"
    assert server.cli("ls", "-l", "exp in (lbl-base, lbl-other),team.example.com/owner!=bob", "--ids"
                      ).stdout.split() == [other, ann]
    assert server.cli("ls", "-l", "exp notin (lbl-base)", "-l", "exp", "--ids").stdout.split()[0] == other
    assert server.cli("ls", "-l", "exp=lbl-base", "-l", "!team.example.com/owner", "--ids").stdout == ""
    shown = server.cli("show", ann)
    assert "labels" in shown.stdout and "exp=lbl-base, team.example.com/owner=ann" in shown.stdout
    assert server.client().jobs(labels={"exp": "lbl-other"}).items[0].id == other
    assert [j.id for j in server.client().jobs(labels="exp=lbl-base,team.example.com/owner notin (bob)").items] == [ann]

    for args, said in [(["run", "-l", "bad key=x", "--", "true"], "--label"), (["ls", "-l", "a b"], "--label"),
                       (["ls", "-l", "k in (a"], "parentheses"),
                       (["ls", "-l", "k=a b"], "label value")]:
        r = server.cli(*args)
        assert r.returncode == 2 and said in r.stderr, (args, r.stderr)
    r = httpx.get(f"{server.url}/api/v1/jobs", params={"label": "k=a b"},
                  headers={"Authorization": f"Bearer {server.token}"})
    assert r.status_code == 422 and r.json()["details"]["errors"][0]["field"] == "label"
    counts = httpx.get(f"{server.url}/api/v1/jobs/counts", params={"label": "exp=lbl-base"},
                       headers={"Authorization": f"Bearer {server.token}"}).json()
    assert sum(counts.values()) == 2
    assert sum(server.client().job_counts(labels={"exp": "lbl-base"}).values()) == 2


def test_the_sdk_iterates_every_matching_job_across_pages(server):
    c = server.client()
    made = [c.submit({"name": "iter", "command": "true", "labels": {"exp": "iter-all"}}).id for _ in range(7)]
    c.submit({"name": "iter", "command": "true", "labels": {"exp": "iter-not"}})
    assert [j.id for j in c.iter_jobs(labels={"exp": "iter-all"}, page=3)] == made[::-1]
    assert [j.id for j in c.iter_jobs(labels={"exp": "iter-none"})] == []
    assert [j.id for j in c.iter_jobs(labels={"exp": "iter-all"}, page=2, sort="created")] == made
    by_name = list(c.iter_jobs(labels={"exp": "iter-all"}, page=2, sort="name"))  # pages by offset
    assert sorted(j.id for j in by_name) == sorted(made) and len(by_name) == 7


def test_ls_sorts_by_a_column_paging_by_offset_and_names_a_bad_sort(server):
    c = server.client()
    made = {n: c.submit({"name": n, "command": "true", "labels": {"exp": "sort-by"}}).id
            for n in ("sb-b", "sb-a", "sb-c")}

    def ls(*args: str) -> list[str]:
        r = server.cli("ls", "-l", "exp=sort-by", "--ids", *args)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert ls("--sort", "name") == [made["sb-a"], made["sb-b"], made["sb-c"]]
    assert ls("--sort", "-name") == [made["sb-c"], made["sb-b"], made["sb-a"]]
    assert ls("--sort", "created") == [made["sb-b"], made["sb-a"], made["sb-c"]]
    assert ls("--sort", "name", "-n", "2", "--all") == ls("--sort", "name")
    first = server.cli("ls", "-l", "exp=sort-by", "--sort", "name", "-n", "2")
    assert "sb-a" in first.stdout and "sb-c" not in first.stdout and "2 shown; more: raise --limit" in first.stderr
    as_json = server.cli("ls", "-l", "exp=sort-by", "--sort", "-name", "-o", "json")  # the SDK's way
    assert [j["spec"]["name"] for j in json.loads(as_json.stdout)] == ["sb-c", "sb-b", "sb-a"]
    for args, flag in [(["--sort", "size"], "--sort"), (["--sort", "--name"], "--sort"),
                       (["--sort", "name", "--after", "1"], "--after")]:
        r = server.cli("ls", *args)
        assert r.returncode == 2 and flag in r.stderr, (args, r.stderr)
