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


def test_a_bad_label_or_selector_is_named_once_as_the_commands_own_not_as_a_spec(server):
    job = server.cli("run", "--", "true").stdout.strip()
    for args, said in [(["label", job, "bad key!=x"], "error: labels: label key 'bad key!': up to 63 letters"),
                       (["label", job, "a=bad value!"], "error: labels: label value 'bad value!': empty, or up"),
                       (["label", "-l", "k in (a", "a=1"], "error: --selector: 'k in (a': unbalanced parentheses\n")]:
        r = server.cli(*args)
        assert r.returncode == 2 and r.stderr.startswith(said) and "invalid spec" not in r.stderr, (args, r.stderr)
    r = httpx.get(f"{server.url}/api/v1/jobs", params={"label": "k in (a"}, headers=server.headers)
    assert r.status_code == 422 and r.json()["code"] == "invalid_spec"
    assert r.json()["message"] == "invalid query parameter label: 'k in (a': unbalanced parentheses"


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


def test_labels_change_after_submit_running_or_ended_and_what_is_refused_is_named(server):
    from tests.e2e.helpers import PY, until

    c = server.client()
    job = c.submit({"name": "held", "command": [PY, "-c", "import time; print('up', flush=True); time.sleep(600)"],
                    "labels": {"exp": "relabel-a"}, "resources": {"cpu": 0.5}})
    until(lambda: "up" in job.logs(), timeout=60)

    r = server.cli("label", job.id, "stage=warm", "exp-")
    assert (r.returncode, r.stdout) == (0, "stage=warm\n"), r.stderr
    assert server.cli("ls", "-l", "stage=warm", "--ids").stdout.split() == [job.id]
    assert server.cli("ls", "-l", "exp=relabel-a", "--ids").stdout == ""
    clash = server.cli("label", job.id, "stage=hot")
    assert clash.returncode == 1 and "already has label stage=warm: ask to overwrite" in clash.stderr
    assert "change it (--overwrite)" in clash.stderr  # the flag that does, named
    assert server.cli("label", job.id, "stage=hot", "--overwrite").stdout == "stage=hot\n"

    c.cancel(job.id)
    assert c.wait(job.id, timeout=60).spec.labels == {"stage": "hot"}  # the end kept them
    assert job.label({"keep": "yes"}) == {"keep": "yes", "stage": "hot"}  # an ended job's change too
    assert c.get(job.id).spec.labels == {"keep": "yes", "stage": "hot"}
    listed = json.loads(server.cli("ls", "-l", "keep=yes", "-o", "json").stdout)
    assert [(j["id"], j["spec"]["labels"]) for j in listed] == [(job.id, {"keep": "yes", "stage": "hot"})]

    # refused, naming what, and nothing changed
    for args, said, code in [(["label", job.id, "novalue"], "no change: write KEY=VALUE to set a label, KEY- to", 2),
                             (["label", job.id, "a=1", "a-"], "label 'a' is given twice", 2),
                             (["label", job.id, "bad key=x"], "label key 'bad key'", 2),
                             (["label", job.id, "trainyard.io/sweep=s-1"], "trainyard's own", 2),
                             (["label", "j-0000000000", "a=1"], "no such job", 1)]:
        r = server.cli(*args)
        assert r.returncode == code and said in r.stderr, (args, r.stderr)
    url = f"{server.url}/api/v1/jobs/{job.id}/labels"
    for body, field in (({"labels": {}}, "labels"), ({"labels": {"a": 5}}, "labels"),
                        ({"labels": {"a": "b"}, "overwrite": "yes"}, "overwrite"),
                        ({"labels": {"a": "b"}, "x": 1}, "x"),
                        ({"labels": {f"k{i}": "v" for i in range(31)}}, "at most 32 labels")):
        r = httpx.patch(url, json=body, headers=server.headers)
        assert r.status_code == 422 and field in r.text, (body, r.text)
    assert c.get(job.id).spec.labels == {"keep": "yes", "stage": "hot"}


def test_many_jobs_are_labelled_at_once_by_selector_or_ids_and_a_refusal_stops_only_its_own(server):
    made = [server.cli("run", "-l", "exp=bulk-a", "--", "true").stdout.strip() for _ in range(3)]
    other = server.cli("run", "-l", "exp=bulk-b", "--", "true").stdout.strip()
    server.client().label(made[0], {"stage": "dev"})

    r = server.cli("label", "-l", "exp=bulk-a", "keep=true")

    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted([f"{made[0]} exp=bulk-a,keep=true,stage=dev"] +
                                                   [f"{j} exp=bulk-a,keep=true" for j in made[1:]])
    assert server.cli("ls", "-l", "keep=true,exp in (bulk-a,bulk-b)", "--ids").stdout.split() == made[::-1]
    # ids on stdin, and the job named beside them; one of them refuses (stage=dev without --overwrite)
    ids = server.cli("ls", "-l", "exp=bulk-a", "--ids").stdout
    r = server.cli("label", "-", other, "stage=eval", "-o", "json", stdin=ids)
    assert r.returncode == 1 and "already has label stage=dev" in r.stderr
    assert sorted(d["job_id"] for d in json.loads(r.stdout)) == sorted([*made[1:], other])
    assert server.client().get(made[0]).spec.labels["stage"] == "dev"
    assert server.client().get(other).spec.labels == {"exp": "bulk-b", "stage": "eval"}
    # a selector that picks none is nothing to do, as `rm $(trainyard ls … --ids)` finding none (kubectl's too)
    none = server.cli("label", "-l", "exp=bulk-none", "keep=true")
    assert none.returncode == 0 and "nothing to do" in none.stderr, none.stderr


def test_a_viewer_may_not_change_a_job_s_labels_and_a_change_is_audited(auth_server):
    from tests.e2e.test_identity import As, cli_as, last_line

    admin = (auth_server.home / "first-admin-token").read_text().strip()
    tokens = {n: last_line(cli_as(auth_server, admin, "admin", "user", "create", n, "--team", "nlp", "--role", r))
              for n, r in (("dora", "member"), ("eve", "viewer"))}
    assert cli_as(auth_server, admin, "queue", "create", "nlp-q", "--team", "nlp").returncode == 0
    dora, eve = As(auth_server, tokens["dora"]), As(auth_server, tokens["eve"])
    job = dora.submit({"name": "t", "command": ["true"], "queue": "nlp-q", "resources": {"cpu": 0.5}}).json()["id"]

    refused = eve.patch(f"/api/v1/jobs/{job}/labels", json={"labels": {"a": "1"}})
    assert refused.status_code == 403 and "change the labels of your own jobs only" in refused.json()["message"]
    done = cli_as(auth_server, tokens["dora"], "label", job, "best=yes")
    assert done.returncode == 0 and done.stdout == "best=yes\n", done.stderr
    audit = As(auth_server, admin).get("/api/v1/audit").json()
    labelled = [(e["user"], e["detail"]) for e in audit if e["action"] == "job.label"]
    assert labelled == [("dora", {"labels": {"best": "yes"}})]
