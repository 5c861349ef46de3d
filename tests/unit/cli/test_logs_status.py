"""``logs`` rendering and ``status`` summarizing, without a cluster (the integration tests
run both against real Runs)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swarmkit_cli.commands import logs, status
from swarmkit_cli.console import Console
from swarmkit_cli.plugin import UsageError

from .support import FakeTTY

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def plain() -> Console:
    return Console(out=io.StringIO(), err=io.StringIO(), environ={})


def test_run_references() -> None:
    assert logs.run_name("run/x") == logs.run_name("runs/x") == logs.run_name("x") == "x"
    assert logs.run_name("skr/x") == "x"
    with pytest.raises(UsageError, match="expected run/NAME"):
        logs.run_name("pod/x")
    with pytest.raises(UsageError, match="missing the Run's name"):
        logs.run_name("run/")


def test_an_audit_line_renders_time_agent_event_tool_outcome_duration() -> None:
    record = {
        "ts": "2026-12-03T08:59:01.250Z",
        "event": "tool.call",
        "agent": "coordinator",
        "tool": "delegate_to_reviewer",
        "outcome": "ok",
        "duration_ms": 1534.2,
        "run_id": "u1",
        "correlation_id": "c",
    }
    line = logs.render(record, plain())
    assert line.split() == [
        "08:59:01.250",
        "coordinator",
        "tool.call",
        "delegate_to_reviewer",
        "ok",
        "1.5s",
    ]
    header = logs.header()
    assert line.index("tool.call") == header.index("EVENT")
    assert line.index("1.5s") == header.index("DURATION")


def test_skill_fills_the_tool_column_and_details_follow() -> None:
    record = {
        "ts": "2026-12-03T08:59:01.250Z",
        "event": "run.end",
        "outcome": "Failed",
        "message": "line one\nline two",
        "steps": 3,
        "duration_ms": 12,
    }
    line = logs.render(record, plain())
    assert "12ms" in line
    assert line.endswith("message=line one line two steps=3")
    assert logs.render({"event": "skill.load", "skill": "triage"}, plain()).split()[1] == "triage"


def test_outcomes_are_coloured_only_on_a_tty() -> None:
    tty = Console(out=FakeTTY(), err=io.StringIO(), environ={})
    ok = logs.render({"event": "x", "outcome": "ok"}, tty)
    bad = logs.render({"event": "x", "outcome": "TimedOut"}, tty)
    assert "\033[32m" in ok and "\033[31m" in bad
    assert "\033[" not in logs.render({"event": "x", "outcome": "ok"}, plain())


def test_only_audit_records_parse() -> None:
    assert logs.parse('{"event": "run.start", "ts": "t"}') == {"event": "run.start", "ts": "t"}
    assert logs.parse("Traceback (most recent call last):") is None
    assert logs.parse('{"not": "an event"}') is None
    assert logs.parse("{broken") is None


def test_follow_splits_chunks_into_lines() -> None:
    chunks = [b'{"event": "a"}\n{"ev', b'ent": "b"}\n', b"tail"]
    assert list(logs._split(chunks)) == ['{"event": "a"}', '{"event": "b"}', "tail"]


def obj(kind: str, name: str, *conds: tuple[str, str, str, str], **meta: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "metadata": {"name": name, **meta},
        "status": {
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conds
            ]
        },
    }


def ready(kind: str, name: str) -> dict[str, Any]:
    return obj(kind, name, ("Ready", "True", "Ready", ""))


def run(name: str, status_: str, reason: str, age: timedelta) -> dict[str, Any]:
    created = (NOW - age).isoformat().replace("+00:00", "Z")
    return obj("Run", name, ("Succeeded", status_, reason, ""), creationTimestamp=created)


def test_status_counts_objects_by_ready_and_lists_the_failing_ones() -> None:
    objects = {
        "Workspace": [ready("Workspace", "default")],
        "Skill": [
            ready("Skill", "a"),
            obj(
                "Skill",
                "b",
                ("Ready", "True", "Ready", ""),
                ("ScriptsApproved", "False", "NotAllowListed", "scripts/x.py: not listed"),
            ),
        ],
        "Agent": [
            obj("Agent", "bad", ("Ready", "False", "UnknownPermissionBundle", "no boss")),
            {"kind": "Agent", "metadata": {"name": "new"}},
        ],
        "Topology": [],
    }
    s = status.summarize("ns", objects, NOW)
    assert s.counts == {
        "Workspace": {"True": 1},
        "Skill": {"True": 2},
        "Agent": {"False": 1, "Pending": 1},
        "Topology": {},
    }
    assert [(p.kind, p.name, p.condition, p.status, p.reason) for p in s.problems] == [
        ("Skill", "b", "ScriptsApproved", "False", "NotAllowListed"),
        ("Agent", "bad", "Ready", "False", "UnknownPermissionBundle"),
        ("Agent", "new", "Ready", "Pending", "NotReconciled"),
    ]
    assert s.failing


def test_status_counts_runs_of_the_last_24_hours_by_outcome() -> None:
    runs = [
        run("a", "True", "Succeeded", timedelta(hours=1)),
        run("b", "False", "TimedOut", timedelta(hours=2)),
        run("c", "Unknown", "Running", timedelta(minutes=1)),
        run("old", "True", "Succeeded", timedelta(days=3)),
    ]
    s = status.summarize("ns", {"Run": runs}, NOW)
    assert s.runs == {"Succeeded": 1, "TimedOut": 1, "Running": 1}
    assert not s.failing


def test_status_text_and_json() -> None:
    s = status.summarize(
        "ns",
        {
            "Skill": [ready("Skill", "a")],
            "Run": [run("a", "True", "Succeeded", timedelta(hours=1))],
        },
        NOW,
    )
    con = plain()
    status.render(s, con)
    out = con.out.getvalue()  # type: ignore[attr-defined]
    assert "Skill       1       1       0           0" in out
    assert "Everything is Ready." in out
    assert "Runs (last 24 h): 1: 1 Succeeded" in out
    data = json.loads(json.dumps(s.as_json()))
    assert data["runsLast24h"] == {"Succeeded": 1} and data["problems"] == []


def test_status_text_lists_what_needs_attention_with_reasons() -> None:
    bad = obj("Agent", "bad", ("Ready", "False", "UnknownPermissionBundle", "no bundle 'boss'"))
    s = status.summarize("ns", {"Agent": [bad]}, NOW)
    con = plain()
    status.render(s, con)
    out = con.out.getvalue()  # type: ignore[attr-defined]
    assert "Needs attention" in out and "Everything is Ready." not in out
    assert "agent/bad   Ready=False   UnknownPermissionBundle   no bundle 'boss'" in out
    assert "Runs (last 24 h): none" in out
