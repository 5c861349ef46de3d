"""``kubectl swarmkit logs --verify`` without a cluster: the pod's log or a held copy against
the Run's ``status.audit`` (the integration test runs it against a real Run's pod)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swarmkit_cli.commands import logs
from swarmkit_cli.console import Console
from swarmkit_cli.plugin import EXIT_FINDINGS, EXIT_OK, CommandError
from swarmkit_runner.audit import AuditLog

from .support import run_cli

UID = "5d7c2f0e-1111-4c22-8e33-9a0b1c2d3e4f"


class _Resp:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        for i in range(0, len(self.data), 7):  # small chunks: lines cross them
            yield self.data[i : i + 7]

    def release_conn(self) -> None:
        pass


class _Core:
    def __init__(self, log: bytes) -> None:
        self.log = log

    def read_namespaced_pod_log(self, pod: str, namespace: str, **kw: Any) -> _Resp:
        assert pod == "r-pod" and kw.get("_preload_content") is False
        return _Resp(self.log)


class _Kube:
    namespace = "team-a"

    def __init__(self, log: str, status: dict[str, Any]) -> None:
        self.core = _Core(log.encode())
        self.status = status

    def get(self, kind: str, name: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "uid": UID}, "status": self.status}


def _log() -> tuple[str, dict[str, Any]]:
    sink = io.StringIO()
    audit = AuditLog(UID, "corr", sink=sink)
    audit.emit("run.start", output="a\u2028b")
    sink.write("swarmkit.outbox e30=\n")  # a non-audit line on the same stream
    audit.emit("tool.call", tool="x", outcome="ok")
    audit.emit("run.end", outcome="Succeeded")
    head = audit.head
    status = {"podName": "r-pod", "audit": {"head": head.head, "lines": head.lines, "pod": "r-pod"}}
    return sink.getvalue(), status


def _console() -> tuple[Console, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return Console(out=out, err=err, environ={}), out, err


def test_the_pods_log_verifies() -> None:
    text, status = _log()
    console, out, _ = _console()
    assert logs.verify_log(_Kube(text, status), "r", None, console) == EXIT_OK
    assert out.getvalue().startswith("verified: pod r-pod: 3 audit lines, chain intact")


def test_a_held_copy_with_an_edited_line_fails_with_exit_1_naming_it(tmp_path: Path) -> None:
    text, status = _log()
    held = tmp_path / "run.log"
    held.write_text(text.replace('"tool": "x"', '"tool": "y"'), encoding="utf-8")
    console, out, err = _console()
    assert logs.verify_log(_Kube(text, status), "r", str(held), console) == EXIT_FINDINGS
    assert out.getvalue() == ""
    assert f"NOT verified: {held}: line 3 is not the line the run wrote" in err.getvalue()


def test_no_head_in_the_status_is_a_clear_error() -> None:
    text, _ = _log()
    with pytest.raises(CommandError, match="no audit chain head in its status"):
        logs.verify_log(_Kube(text, {"podName": "r-pod"}), "r", None, _console()[0])


def test_file_needs_verify_and_verify_refuses_follow() -> None:
    assert run_cli("logs", "run/r", "--file", "x.log").code == 2
    assert run_cli("logs", "run/r", "--verify", "-f").code == 2
