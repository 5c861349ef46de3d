"""Schedules and retention: due times, names, history limits (pure parts)."""

from __future__ import annotations

from datetime import UTC, datetime

from swarmkit_api.topology import HistoryLimit, Schedule
from swarmkit_operator.runs.retention import history_victims
from swarmkit_operator.runs.schedule import due_time, scheduled_run, scheduled_run_name


def t(h: int, m: int, day: int = 1) -> datetime:
    return datetime(2025, 3, day, h, m, tzinfo=UTC)


def test_due_time_takes_only_the_most_recent_missed_time() -> None:
    hourly = Schedule(cron="0 * * * *")
    assert due_time(hourly, t(10, 0), t(10, 30)) is None
    assert due_time(hourly, t(10, 0), t(11, 0)) == t(11, 0)
    # after 5 hours of downtime: one catch-up, for the latest time
    assert due_time(hourly, t(5, 0), t(10, 20)) == t(10, 0)


def test_due_time_honours_the_time_zone() -> None:
    nine_in_berlin = Schedule(cron="0 9 * * *", timezone="Europe/Berlin")
    # 1 March: CET = UTC+1 → 08:00 UTC
    assert due_time(nine_in_berlin, t(0, 0), t(8, 30)) == t(8, 0)
    assert due_time(nine_in_berlin, t(0, 0), t(7, 59)) is None


def test_scheduled_run_is_named_from_its_time_and_owned_by_the_topology() -> None:
    when = t(11, 0)
    name = scheduled_run_name("review-pipeline", when)
    assert name == f"review-pipeline-{int(when.timestamp() // 60)}"
    manifest = scheduled_run(
        "review-pipeline", "ns", "uid-1", Schedule(cron="0 * * * *", input="go"), when
    )
    assert manifest["metadata"]["name"] == name
    assert manifest["spec"] == {
        "topologyRef": {"name": "review-pipeline"},
        "input": "go",
        "correlationId": name,
    }
    assert manifest["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert manifest["metadata"]["labels"]["swarmkit.dev/scheduled"] == "true"
    assert len(scheduled_run_name("x" * 63, when)) <= 63


def test_history_victims_keep_the_newest_of_each_outcome() -> None:
    finished = [
        ("s1", "succeeded", "2025-01-01T00:00:01Z"),
        ("s2", "succeeded", "2025-01-01T00:00:02Z"),
        ("s3", "succeeded", "2025-01-01T00:00:03Z"),
        ("f1", "failed", "2025-01-01T00:00:01Z"),
        ("f2", "failed", "2025-01-01T00:00:02Z"),
    ]
    assert sorted(history_victims(finished, HistoryLimit(succeeded=2, failed=1))) == ["f1", "s1"]
    assert history_victims(finished, HistoryLimit(succeeded=10, failed=10)) == []
    assert sorted(history_victims(finished, HistoryLimit(succeeded=0, failed=0))) == sorted(
        n for n, _, _ in finished
    )
