"""Schedule frames (issue 33 part 1): each frame's success and refusal, on the embedded
shape; another user of the tenant and another tenant's user see a schedule as missing and
cannot touch it."""

from __future__ import annotations

from tests.gateway.wire import REFUSAL, SUCCESS, Client, covers
from tests.helpers import wait_for
from vancetope_brain.identity import Principal

YEARLY = "0 7 1 1 *"


def _created(client: Client, **fields) -> dict:
    return client.ok("schedule-create", **{"name": "brief", "cron": YEARLY,
                                           "recipe": "vogon-cron", "goal": "the launch",
                                           "timezone": "Europe/Berlin", **fields})


@covers("schedule-create", SUCCESS, REFUSAL)
def test_schedule_create_and_its_refusals(emb, client):
    created = _created(client, missed="runOnce")
    schedule = created["schedule"]
    assert (schedule["name"], schedule["recipe"], schedule["missed"], schedule["paused"]) == (
        "brief", "vogon-cron", "runOnce", False)
    assert created["runs"] == [] and schedule["lastRun"] is None
    assert len(created["nextRuns"]) == 5 and created["nextRuns"][0] == schedule["nextRunAt"]
    # 07:00 on 1 January in Berlin (CET, UTC+1) is 06:00 UTC.
    assert all("-01-01T06:00:00" in tick for tick in created["nextRuns"])
    assert "tenantId" not in schedule and "userId" not in schedule
    assert "no cron expression" in client.refused("schedule-create", "invalid_schedule",
                                                  name="x", cron="daily", recipe="vogon-cron")
    assert "unknown time zone" in client.refused(
        "schedule-create", "invalid_schedule", name="x", cron=YEARLY, recipe="vogon-cron",
        timezone="Mars/Olympus")
    assert "field of seconds" in client.refused(
        "schedule-create", "invalid_schedule", name="x", cron="* * * * * */5",
        recipe="vogon-cron")
    client.refused("schedule-create", "not_found", name="x", cron=YEARLY, recipe="vogon-crom")
    assert "worker recipe" in client.refused("schedule-create", "invalid_input", name="x",
                                             cron=YEARLY, recipe="arthur")
    client.refused("schedule-create", "not_found", name="x", cron=YEARLY, recipe="vogon-cron",
                   projectId="no-such-project")
    client.refused("schedule-create", "invalid_input", cron=YEARLY, recipe="vogon-cron")
    cap = emb.brain.schedules.max_per_project
    emb.brain.schedules.max_per_project = len(emb.brain.schedules.of_user(emb.who, "default"))
    try:
        assert "delete one first" in client.refused(
            "schedule-create", "limit_exceeded", name="x", cron=YEARLY, recipe="vogon-cron")
    finally:
        emb.brain.schedules.max_per_project = cap


@covers("schedule-list", SUCCESS, REFUSAL)
@covers("schedule-get", SUCCESS, REFUSAL)
def test_schedule_list_and_get(emb, client):
    sid = _created(client, name="listed")["schedule"]["id"]
    listed = client.ok("schedule-list")["schedules"]
    assert sid in [s["id"] for s in listed]
    assert sid in [s["id"] for s in client.ok("schedule-list", projectId="default")["schedules"]]
    client.refused("schedule-list", "invalid_input", projectId="")
    got = client.ok("schedule-get", scheduleId=sid)
    assert got["schedule"]["name"] == "listed" and len(got["nextRuns"]) == 5
    client.refused("schedule-get", "not_found", scheduleId="sch_missing")
    client.refused("schedule-get", "invalid_input")


@covers("schedule-update", SUCCESS, REFUSAL)
def test_schedule_update(emb, client):
    sid = _created(client, name="before")["schedule"]["id"]
    updated = client.ok("schedule-update", scheduleId=sid, name="after", cron="30 6 * * 1",
                        timezone="UTC")["schedule"]
    assert (updated["name"], updated["cron"], updated["timezone"]) == ("after", "30 6 * * 1",
                                                                       "UTC")
    assert updated["nextRunAt"].endswith(("06:30:00Z", "06:30:00+00:00"))
    client.refused("schedule-update", "invalid_schedule", scheduleId=sid, cron="nope")
    client.refused("schedule-update", "not_found", scheduleId="sch_missing", name="x")
    assert client.ok("schedule-get", scheduleId=sid)["schedule"]["name"] == "after"


@covers("schedule-pause", SUCCESS, REFUSAL)
@covers("schedule-resume", SUCCESS, REFUSAL)
def test_schedule_pause_and_resume(emb, client):
    sid = _created(client)["schedule"]["id"]
    paused = client.ok("schedule-pause", scheduleId=sid)
    assert paused["schedule"]["paused"] and paused["schedule"]["nextRunAt"] is None
    assert paused["nextRuns"] == []
    resumed = client.ok("schedule-resume", scheduleId=sid)
    assert not resumed["schedule"]["paused"] and resumed["schedule"]["nextRunAt"] is not None
    client.refused("schedule-pause", "not_found", scheduleId="sch_missing")
    client.refused("schedule-resume", "not_found", scheduleId="sch_missing")


@covers("schedule-run-now", SUCCESS, REFUSAL)
def test_schedule_run_now_runs_it_once_outside_its_cron(emb, client):
    sid = _created(client, recipe="ford", goal="now please")["schedule"]["id"]
    client.ok("schedule-pause", scheduleId=sid)
    run = client.ok("schedule-run-now", scheduleId=sid)["run"]
    assert run["status"] == "STARTED" and run["processId"].startswith("proc_s")
    wait_for(lambda: client.ok("schedule-get", scheduleId=sid)["runs"][0]["status"] == "DONE",
             timeout=30, what="the run to end")
    got = client.ok("schedule-get", scheduleId=sid)
    assert [r["id"] for r in got["runs"]] == [run["id"]] and got["schedule"]["paused"]
    client.refused("schedule-run-now", "not_found", scheduleId="sch_missing")


@covers("schedule-delete", SUCCESS, REFUSAL)
def test_schedule_delete_and_another_users_or_tenants_schedule_is_missing(emb, client):
    sid = _created(client)["schedule"]["id"]
    emb.brain.identity.create_user("acme", "carol", "carol")
    emb.brain.identity.create_tenant("umbrella", "umbrella")
    emb.brain.identity.create_user("umbrella", "wesker", "wesker")
    for who in (Principal("acme", "carol"), Principal("umbrella", "wesker")):
        other = Client(emb, who)
        try:
            assert sid not in [s["id"] for s in other.ok("schedule-list")["schedules"]]
            for frame_type in ("schedule-get", "schedule-pause", "schedule-resume",
                               "schedule-run-now", "schedule-delete"):
                other.refused(frame_type, "not_found", scheduleId=sid)
            other.refused("schedule-update", "not_found", scheduleId=sid, name="mine")
        finally:
            other.close()
    assert client.ok("schedule-get", scheduleId=sid)["schedule"]["name"] == "brief"
    assert client.ok("schedule-delete", scheduleId=sid) == {"scheduleId": sid}
    client.refused("schedule-delete", "not_found", scheduleId=sid)
    client.refused("schedule-get", "not_found", scheduleId=sid)
