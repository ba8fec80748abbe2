"""A schedule's spec: what it refuses (naming the field, and the line in a file), and when its cron fires,
checked against times worked out by hand, across both daylight saving changes of Europe/Paris in 2026
(29 March, 02:00 → 03:00; 25 October, 03:00 → 02:00)."""

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from trainyard.errors import InvalidSpec
from trainyard.sdk.schedules import job_schedule, load_schedule
from trainyard.spec.schedule import COUNT_CAP, ScheduleSpec, fires_between, last_fire, next_fire

UTC = timezone.utc
PARIS = ZoneInfo("Europe/Paris")
JOB = {"command": "python train.py --until {{params.scheduled_at}}"}


def schedule(**fields) -> dict:
    return {"name": "nightly", "cron": "0 3 * * *", "job": JOB, **fields}


def at(*when: int, tz=UTC) -> float:
    return datetime(*when, tzinfo=tz).timestamp()


def refused(data: dict) -> dict[str, str]:
    """``{field: message}`` of the errors ``data`` is refused with."""
    with pytest.raises(InvalidSpec) as e:
        load_schedule(data)
    return {err["field"]: err["message"] for err in e.value.errors}


# -- what a spec refuses ---------------------------------------------------------------------------


@pytest.mark.parametrize("cron, why", [
    ("61 * * * *", "Bad minute"),
    ("0 24 * * *", "Bad hour"),
    ("0 0 30 2 *", "Bad day-of-month"),  # 30 February never comes
    ("0 0 31 4 *", "Bad day-of-month"),
    ("0 3 * *", "has 4 fields; a cron has five: minute hour day-of-month month day-of-week"),
    ("every night", "has 2 fields; a cron has five"),
    ("@fortnightly", "Wrong number of fields"),
    # cronsim reads a sixth field as seconds first: a schedule that fired every second
    ("* * * * * *", "has 6 fields; a cron has five: minute hour day-of-month month day-of-week (e.g. '0 3 * * *')"),
    ("0 0 3 * * *", "has 6 fields"),
    ("0 3 * * * 2026", "has 6 fields"),  # a year, as Quartz's last field
])
def test_a_bad_cron_is_refused_naming_the_field_and_what_is_wrong(cron, why):
    errors = refused(schedule(cron=cron))
    assert list(errors) == ["cron"]
    assert repr(cron) in errors["cron"] and why in errors["cron"], errors


def test_a_cron_longer_than_the_cap_is_refused_before_it_is_read():
    assert refused(schedule(cron="0 " * 150)) == {"cron": "at most 200 characters"}


def test_29_february_is_a_day_that_comes_so_its_cron_is_taken():
    spec = load_schedule(schedule(cron="0 0 29 2 *"))
    assert next_fire(spec.cron, "UTC", at(2026, 1, 1)) == at(2028, 2, 29)


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/localtime", "Europe/../../../etc/passwd", "Mars/Olympus",
                                  "", "x" * 65])
def test_a_time_zone_the_server_does_not_know_is_refused_and_no_path_is_read(name):
    errors = refused(schedule(timezone=name))
    assert list(errors) == ["timezone"], errors
    assert "time zone" in errors["timezone"]


@pytest.mark.parametrize("deadline, said", [(-5, "greater than or equal to 0"), ("soon", "is not a duration"),
                                            (float("nan"), "finite"), ("-1h", ""), (0, "at least 1s"),
                                            (0.5, "at least 1s")])
def test_a_negative_or_unreadable_starting_deadline_is_refused(deadline, said):
    errors = refused(schedule(starting_deadline=deadline))
    assert list(errors) == ["starting_deadline"] and said in errors["starting_deadline"], errors


def test_a_starting_deadline_is_read_as_a_duration():
    assert load_schedule(schedule(starting_deadline="10m")).starting_deadline == 600.0
    assert load_schedule(schedule()).starting_deadline == 3600.0  # Kubernetes has none; ours is an hour


@pytest.mark.parametrize("name", ["has space", "-leading-dash", "x" * 64, "ünïcode", "a/b", "a\nb"])
def test_a_name_outside_the_name_rules_is_refused(name):
    assert list(refused(schedule(name=name))) == ["name"]


def test_a_concurrency_outside_the_three_is_refused():
    errors = refused(schedule(concurrency="sometimes"))
    assert list(errors) == ["concurrency"] and "'forbid', 'allow' or 'replace'" in errors["concurrency"]


def test_a_job_param_the_command_uses_but_nobody_gives_is_still_refused():
    errors = refused(schedule(job={"command": "train --lr {{params.lr}} --until {{params.scheduled_at}}"}))
    assert list(errors) == ["job"] and "lr" in errors["job"] and "scheduled_at" not in errors["job"], errors


def test_a_job_leaves_room_for_the_label_each_run_gets():
    errors = refused(schedule(job={**JOB, "labels": {f"k{i}": "v" for i in range(32)}}))
    assert list(errors) == ["job"] and "at most 31" in errors["job"] and "trainyard.io/schedule" in errors["job"]


def test_a_job_may_not_claim_the_label_each_run_gets():
    errors = refused(schedule(job={**JOB, "labels": {"trainyard.io/schedule": "other"}}))
    assert list(errors) == ["job"] and "trainyard.io/schedule: labels under trainyard.io/ are trainyard's own" in \
        errors["job"], errors


def test_job_params_that_are_not_a_mapping_are_refused_not_dropped():
    assert "job.params" in refused(schedule(job={"command": "echo hi", "params": "oops"}))


# -- cron forms ------------------------------------------------------------------------------------


@pytest.mark.parametrize("alias, cron", [("@daily", "0 0 * * *"), ("@DAILY", "0 0 * * *"), ("@hourly", "0 * * * *"),
                                         ("@weekly", "0 0 * * 0"), ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *")])
def test_an_alias_fires_as_the_expression_it_stands_for(alias, cron):
    spec = load_schedule(schedule(cron=alias))
    t, fires = at(2026, 1, 1, 12), []
    for _ in range(3):
        t = next_fire(spec.cron, "UTC", t)
        fires.append(t)
    assert fires[0] == next_fire(cron, "UTC", at(2026, 1, 1, 12))
    assert fires[1:] == [next_fire(cron, "UTC", f) for f in fires[:-1]]


def test_daily_fires_at_midnight_of_the_schedules_own_zone():
    assert next_fire("@daily", "Europe/Paris", at(2026, 1, 1, 12)) == at(2026, 1, 1, 23)  # 00:00 +01:00


def test_a_six_field_cron_stored_before_they_were_refused_loads_and_reads_seconds_first():
    from trainyard.spec.submitted import STORED

    spec = ScheduleSpec.model_validate(schedule(cron="30 */10 * * * *"), context=STORED)
    t = at(2026, 1, 1)
    first = next_fire(spec.cron, "UTC", t)
    assert first == at(2026, 1, 1, 0, 0, 30)
    assert next_fire(spec.cron, "UTC", first) == at(2026, 1, 1, 0, 10, 30)


# -- when it fires ---------------------------------------------------------------------------------


def test_next_fire_is_strictly_after_and_last_fire_at_or_before():
    three = at(2026, 1, 1, 3)
    assert next_fire("0 3 * * *", "UTC", at(2026, 1, 1)) == three
    assert next_fire("0 3 * * *", "UTC", three) == at(2026, 1, 2, 3)  # not the fire at `after` itself
    assert next_fire("0 3 * * *", "UTC", three - 0.2) == three  # nor a fraction of a second before it
    assert last_fire("0 3 * * *", "UTC", three) == three
    assert last_fire("0 3 * * *", "UTC", three - 1) == at(2025, 12, 31, 3)


def test_a_cron_runs_on_its_zones_clock_summer_and_winter():
    assert next_fire("0 3 * * *", "Europe/Paris", at(2026, 1, 10)) == at(2026, 1, 10, 2)  # CET, +01:00
    assert next_fire("0 3 * * *", "Europe/Paris", at(2026, 7, 10)) == at(2026, 7, 10, 1)  # CEST, +02:00


def test_fires_between_counts_those_strictly_inside_up_to_the_cap():
    assert fires_between("0 * * * *", "UTC", at(2026, 1, 1), at(2026, 1, 1, 5)) == 4  # 01:00 … 04:00
    assert fires_between("0 * * * *", "UTC", at(2026, 1, 1), at(2026, 1, 1, 0, 59)) == 0
    assert fires_between("* * * * * *", "UTC", at(2026, 1, 1), at(2026, 1, 2)) == COUNT_CAP  # 86,399 seconds


def test_a_fixed_time_in_the_skipped_hour_fires_once_right_after_the_change():
    """Debian cron: a job due in the hour skipped in spring runs soon after the change, once."""
    first = next_fire("30 2 * * *", "Europe/Paris", at(2026, 3, 28, 12))
    assert first == at(2026, 3, 29, 3, tz=PARIS)  # 01:00Z, the first moment of summer time
    assert next_fire("30 2 * * *", "Europe/Paris", first) == at(2026, 3, 30, 2, 30, tz=PARIS)
    assert last_fire("30 2 * * *", "Europe/Paris", at(2026, 3, 29, 12, tz=PARIS)) == first
    assert fires_between("30 2 * * *", "Europe/Paris", at(2026, 3, 28, 12), at(2026, 3, 29, 12)) == 1


def test_a_fixed_time_in_the_repeated_hour_fires_only_the_first_time():
    """Debian cron: when the clock goes back under three hours, a job due in the repeated hour is not run again."""
    first = next_fire("30 2 * * *", "Europe/Paris", at(2026, 10, 24, 12))
    assert first == at(2026, 10, 25, 0, 30)  # 02:30 summer time
    assert next_fire("30 2 * * *", "Europe/Paris", first) == at(2026, 10, 26, 1, 30)  # not 01:30Z the same night
    assert fires_between("30 2 * * *", "Europe/Paris", at(2026, 10, 24, 12), at(2026, 10, 25, 12)) == 1


@pytest.mark.parametrize("start, hours", [
    (at(2026, 3, 28, 23), [0, 1, 2]),  # 01:00+01, then 03:00+02: the hour with no 02:00 is not made up
    (at(2026, 10, 24, 23), [0, 1, 2]),  # 02:00+02, 02:00+01, 03:00+01: a wildcard hour follows the wall clock
])
def test_an_hourly_cron_fires_each_real_hour_across_a_change(start, hours):
    t, fires = start, []
    for _ in hours:
        t = next_fire("0 * * * *", "Europe/Paris", t)
        fires.append(t)
    assert fires == [start + 3600 * (h + 1) for h in hours]


CRONS = ["30 2 * * *", "0 2 * * *", "30 1-3 * * *", "15 2,3 * * *", "0 * * * *", "*/30 * * * *", "*/7 * * * *",
         "@daily"]


@pytest.mark.parametrize("cron", CRONS)
@pytest.mark.parametrize("day", [(2026, 3, 28), (2026, 10, 24)])
def test_fire_after_fire_is_strictly_later_and_none_comes_twice(cron, day):
    t, fires = at(*day), []
    while t < at(*day) + 3 * 86400:
        t = next_fire(cron, "Europe/Paris", t)
        fires.append(t)
    assert fires == sorted(set(fires)), fires
    assert all(last_fire(cron, "Europe/Paris", f) == f for f in fires)


@pytest.mark.parametrize("cron", ["30 2 * * *", "30 1-3 * * *", "15 2,3 * * *"])
def test_next_fire_is_after_and_last_fire_the_latest_from_inside_the_repeated_hour(cron):
    fires, t = [], at(2026, 10, 24)
    while t < at(2026, 10, 26):
        t = next_fire(cron, "Europe/Paris", t)
        fires.append(t)
    for minute in range(0, 60, 5):
        now = at(2026, 10, 25, 1, minute)  # 02:mm+01:00, the second pass of that hour
        assert next_fire(cron, "Europe/Paris", now) == min(f for f in fires if f > now)
        assert last_fire(cron, "Europe/Paris", now) == max(f for f in fires if f <= now)


# -- each run's job --------------------------------------------------------------------------------


def test_each_run_is_given_its_time_in_the_schedules_zone_and_the_command_says_it():
    spec = load_schedule(schedule(timezone="Europe/Paris", job={**JOB, "params": {"lr": 0.1}}))
    job = spec.run_job(at(2026, 7, 1, 1))
    assert job.params == {"lr": 0.1, "scheduled_at": "2026-07-01T03:00:00+02:00"}
    assert job.argv()[-1] == "python train.py --until 2026-07-01T03:00:00+02:00"
    assert spec.run_job(at(2026, 1, 1, 2)).argv()[-1] == "python train.py --until 2026-01-01T03:00:00+01:00"
    assert job.labels == {"trainyard.io/schedule": "nightly"}  # its runs: trainyard ls -l trainyard.io/schedule=nightly


def test_a_list_command_gets_the_time_as_one_argument():
    spec = load_schedule(schedule(job={"command": ["python", "eval.py", "--at", "{{params.scheduled_at}}"]}))
    assert spec.run_job(at(2026, 5, 1, 3)).argv() == ["python", "eval.py", "--at", "2026-05-01T03:00:00+00:00"]


# -- files -----------------------------------------------------------------------------------------


def write(tmp_path, text: str, name: str = "nightly.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def file_errors(call) -> dict[str, dict]:
    with pytest.raises(InvalidSpec) as e:
        call()
    return {err["field"]: err for err in e.value.errors}


def test_an_error_in_a_schedule_file_names_the_field_and_its_line(tmp_path):
    path = write(tmp_path, "name: nightly\ntimezone: UTC\ncron: '0 25 * * *'\njob:\n  command: train\n"
                           "  resources:\n    cpu: -1\n")
    errors = file_errors(lambda: load_schedule(path))
    assert errors["cron"]["line"] == 3 and errors["cron"]["where"] == f"{path}:3 cron"
    assert errors["job.resources.cpu"]["line"] == 7


def test_a_misspelt_field_in_a_schedule_file_is_named_with_the_one_meant(tmp_path):
    errors = file_errors(lambda: load_schedule(write(tmp_path, "name: n\ncron: '@daily'\nconcurency: allow\n"
                                                               "job: {command: x}\n")))
    assert errors["concurency"]["line"] == 3 and "did you mean 'concurrency'" in errors["concurency"]["message"]


def test_a_schedule_file_that_is_not_yaml_names_the_line(tmp_path):
    errors = file_errors(lambda: load_schedule(write(tmp_path, "name: n\ncron: '@daily'\njob: [unclosed\n")))
    assert errors[""]["line"] == 4 and "not valid YAML" in errors[""]["message"]


def test_a_job_spec_given_as_a_schedule_says_how_to_schedule_it(tmp_path):
    path = write(tmp_path, "name: train\ncommand: python train.py\n", "job.yaml")
    with pytest.raises(InvalidSpec) as e:
        load_schedule(path)
    said = [(err["field"], err["message"]) for err in e.value.errors]
    assert ("cron", "field required") in said and ("command", "unknown field 'command'") in said
    assert said[-1] == ("job", f"this is a job spec: schedule it with `trainyard schedule create {path} "
                               "--cron '0 3 * * *'`")


def test_a_job_file_wrapped_on_a_cron_is_named_as_the_job_and_may_use_scheduled_at(tmp_path):
    path = write(tmp_path, "name: train\ncommand: python train.py --until {{params.scheduled_at}}\n", "job.yaml")
    spec = job_schedule(path, "0 4 * * *", timezone="Europe/Paris", concurrency="replace")
    assert (spec.name, spec.cron, spec.timezone, spec.concurrency.value) == ("train", "0 4 * * *", "Europe/Paris",
                                                                             "replace")
    assert job_schedule(path, "@daily", name="other").name == "other"


def test_an_error_in_a_wrapped_job_file_names_the_jobs_own_line(tmp_path):
    path = write(tmp_path, "name: train\ncommand: python train.py\nresources:\n  gpuu: 1\n", "job.yaml")
    errors = file_errors(lambda: job_schedule(path, "0 4 * * *"))
    assert errors["job.resources.gpuu"]["line"] == 4 and "did you mean 'gpu'" in errors["job.resources.gpuu"]["message"]
    errors = file_errors(lambda: job_schedule(path.with_name("missing.yaml"), "0 4 * * *"))
    assert "cannot read" in errors[""]["message"]


def test_a_bad_cron_or_time_zone_given_to_wrap_a_job_file_is_named_as_the_flag_not_the_file(tmp_path):
    path = write(tmp_path, "name: train\ncommand: python train.py\n", "job.yaml")
    errors = file_errors(lambda: job_schedule(path, "61 * * * *", timezone="Mars/Base"))
    assert errors["cron"]["where"] == "command line --cron (cron)" and "Bad minute" in errors["cron"]["message"]
    assert errors["timezone"]["where"] == "command line --timezone (timezone)"


def test_a_spec_model_goes_through_load_schedule_as_it_is():
    spec = ScheduleSpec.model_validate(schedule())
    assert load_schedule(spec) is spec
