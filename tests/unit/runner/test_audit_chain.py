"""The audit hash chain: the runner writes linked lines, the result carries the head, and a
copy of the log verifies only as written (issue 41 item 5). The integration test
(tests/integration/test_audit_verify.py) checks a real Run's pod log with the CLI."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

from swarmkit_api.audit_chain import anchor, line_hash, verify
from swarmkit_api.bundle import RunResult
from swarmkit_runner.audit import AuditLog
from swarmkit_runner.result import make_result, write_termination_log
from swarmkit_runner.secrets import SecretStore

UID = "0b1e7a52-6f0c-4a4b-9d2e-1c3f5a7b9d11"


def written(n: int = 5, run_id: str = UID) -> tuple[list[str], AuditLog]:
    sink = io.StringIO()
    audit = AuditLog(run_id, "corr", sink=sink)
    for i in range(n):
        audit.emit("tool.call", agent="a", tool=f"t{i}", outcome="ok")
    return sink.getvalue().split("\n")[:-1], audit


def check(lines: list[str], audit: AuditLog) -> tuple[bool, str, int | None]:
    head = audit.head
    result = verify(lines, UID, head.head, head.lines)
    return result.ok, result.message, result.bad_line


def test_each_line_names_the_hash_of_the_one_before_the_first_the_run_uid() -> None:
    lines, audit = written(3)
    records = [json.loads(line) for line in lines]
    assert lines[0].startswith('{"prev":"')
    assert records[0]["prev"] == anchor(UID)
    assert records[1]["prev"] == line_hash(lines[0])
    assert records[2]["prev"] == line_hash(lines[1])
    assert audit.head.head == line_hash(lines[2]) and audit.head.lines == 3
    assert records[1]["tool"] == "t1"  # the record itself is unchanged


def test_the_log_as_written_verifies() -> None:
    lines, audit = written()
    noise = ["swarmkit.checkpoint abc", "Traceback (most recent call last):", ""]
    assert check(noise[:1] + lines[:2] + noise[1:] + lines[2:], audit)[0]


def test_an_edited_line_fails_naming_it() -> None:
    lines, audit = written()
    lines[2] = lines[2].replace('"t2"', '"rm -rf"')
    ok, message, bad = check(lines, audit)
    assert not ok and bad == 3
    assert message.startswith("line 3 is not the line the run wrote") and "changed" in message


def test_an_edited_last_line_fails_at_the_head() -> None:
    lines, audit = written()
    lines[-1] = lines[-1].replace('"ok"', '"failed"')
    ok, message, bad = check(lines, audit)
    assert not ok and bad == 5 and "line 5 (the last audit line)" in message


def test_a_removed_line_fails_naming_where() -> None:
    lines, audit = written()
    del lines[1]
    ok, message, bad = check(lines, audit)
    assert not ok and bad == 2
    assert message == "line 2 does not follow line 1: a line between them was removed"


def test_a_removed_first_or_last_line_fails() -> None:
    lines, audit = written()
    ok, message, bad = check(lines[1:], audit)
    assert not ok and bad == 1 and "not the run's first audit line" in message
    ok, message, bad = check(lines[:-1], audit)
    assert not ok and bad == 4 and "1 line(s) after it were removed" in message


def test_a_reordered_pair_fails_naming_the_moved_line() -> None:
    lines, audit = written()
    lines[1], lines[2] = lines[2], lines[1]
    ok, message, bad = check(lines, audit)
    assert not ok and bad == 2
    assert message == "line 2 is out of order: the run wrote it right after line 3"


def test_another_runs_log_does_not_verify() -> None:
    lines, _ = written(run_id="another-uid")
    other = AuditLog("x", "c", sink=io.StringIO())
    result = verify(lines, UID, line_hash(lines[-1]), len(lines))
    assert not result.ok and result.bad_line == 1
    assert not verify([], UID, other.head.head, 0).ok


def test_an_added_line_fails_and_other_json_output_is_skipped() -> None:
    lines, audit = written(2)
    structlog = json.dumps({"event": "connected", "level": "info"})  # an MCP server's stderr
    assert check([lines[0], structlog, lines[1]], audit)[0]
    forged = json.dumps({"event": "tool.call", "run_id": UID, "tool": "rm"})
    ok, message, bad = check([lines[0], forged, lines[1]], audit)
    assert not ok and bad == 2 and "no 'prev' hash" in message


def test_child_runs_and_sessions_extend_the_one_stream_chain() -> None:
    sink = io.StringIO()
    audit = AuditLog(UID, "corr", sink=sink)
    audit.emit("run.start")
    audit.child("child-uid").emit("child_run")
    audit.session("s1", identity="alice").emit("session.start")
    audit.emit("run.end", outcome="Succeeded")
    lines = sink.getvalue().split("\n")[:-1]
    assert audit.head.lines == 4
    assert verify(lines, UID, audit.head.head, 4).ok


def test_concurrent_writers_keep_one_chain() -> None:
    sink = io.StringIO()
    audit = AuditLog(UID, "corr", sink=sink)

    def write(n: int) -> None:
        for i in range(50):
            audit.emit("tool.call", tool=f"{n}-{i}")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = sink.getvalue().split("\n")[:-1]
    assert len(lines) == 200 and verify(lines, UID, audit.head.head, 200).ok


def test_the_hash_is_of_the_scrubbed_line_as_written() -> None:
    sink = io.StringIO()
    secret = "sk-live-0123456789abcdef"
    audit = AuditLog(UID, "corr", SecretStore({"SWARMKIT_SECRET_API_KEY": secret}), sink=sink)
    audit.emit("tool.call", output=f"key {secret}")
    audit.emit("run.end")
    lines = sink.getvalue().split("\n")[:-1]
    assert secret not in sink.getvalue()
    assert verify(lines, UID, audit.head.head, 2).ok


def test_a_line_holding_a_unicode_line_separator_verifies_split_at_newlines_only() -> None:
    sink = io.StringIO()
    audit = AuditLog(UID, "corr", sink=sink)
    audit.emit("tool.call", output="one\u2028two\x1cthree")
    audit.emit("run.end")
    lines = sink.getvalue().split("\n")[:-1]
    assert len(lines) == 2 and verify(lines, UID, audit.head.head, 2).ok


def test_the_termination_result_carries_the_head(tmp_path: Path) -> None:
    lines, audit = written(3)
    path = tmp_path / "termination-log"
    write_termination_log(path, make_result("Succeeded", output="done"), audit)
    result = RunResult.model_validate_json(path.read_text())
    assert result.audit is not None
    assert result.audit.head == line_hash(lines[-1]) and result.audit.lines == 3


def test_a_copy_of_several_pods_logs_is_cut_where_each_chain_starts() -> None:
    from swarmkit_api.audit_chain import chains

    first, a1 = written(3)
    second, a2 = written(2)
    copy = ["stderr noise", *first, "more noise", *second]
    (s1, part1), (s2, part2) = chains(copy, UID)
    # a chain starts at its first audit line: the noise before it stays with the chain before
    assert (s1, s2) == (1, 6) and part1 == ["stderr noise", *first, "more noise"]
    assert part2 == second
    assert verify(part1, UID, a1.head.head, 3, s1).ok
    assert verify(part2, UID, a2.head.head, 2, s2).ok
    # line numbers count in the whole copy: the second chain's first audit line is line 6
    edited = list(part2)
    edited[0] = edited[0].replace('"tool": "t0"', '"tool": "tX"')
    assert edited != part2
    bad = verify(edited, UID, a2.head.head, 2, s2)
    assert not bad.ok and bad.bad_line == 6, bad
    # no chain start at all (the first line was changed): one chain, whose check fails
    assert len(chains(first[1:], UID)) == 1
    assert chains([], UID) == [(1, [])]
