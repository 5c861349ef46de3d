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


# --- a resumed Run: one chain per pod ------------------------------------------------------


class _Pods:
    """The pod log API of several pods; a pod not in ``logs`` is gone (404)."""

    def __init__(self, logs: dict[str, str]) -> None:
        self.logs = logs

    def read_namespaced_pod_log(self, pod: str, namespace: str, **kw: Any) -> _Resp:
        from kubernetes.client.exceptions import ApiException

        if pod not in self.logs:
            raise ApiException(status=404, reason="Not Found")
        return _Resp(self.logs[pod].encode())


def _pod_chain(events: int) -> tuple[str, dict[str, Any]]:
    """One pod's log (each pod's chain starts at the Run's anchor) and its head."""
    sink = io.StringIO()
    audit = AuditLog(UID, "corr", sink=sink)
    for i in range(events):
        audit.emit("tool.call", tool=f"t{i}", outcome="ok")
    return sink.getvalue(), {"head": audit.head.head, "lines": audit.head.lines}


def _resumed(gone: tuple[str, ...] = ()) -> tuple[_Kube, list[str]]:
    """A Run parked on pod r-1 (3 audit lines) and resumed on pod r-2 (2); the pods in
    ``gone`` are deleted (their logs with them)."""
    first, head1 = _pod_chain(3)
    second, head2 = _pod_chain(2)
    status = {
        "podName": "r-2",
        "audit": [{**head1, "pod": "r-1"}, {**head2, "pod": "r-2"}],
    }
    kube = _Kube("", status)
    pods = {name: log for name, log in (("r-1", first), ("r-2", second)) if name not in gone}
    kube.core = _Pods(pods)  # type: ignore[assignment]
    return kube, [first, second]


def test_each_pods_chain_of_a_resumed_run_verifies() -> None:
    kube, _ = _resumed()
    console, out, err = _console()
    assert logs.verify_log(kube, "r", None, console) == EXIT_OK
    assert out.getvalue().splitlines() == [
        "verified: pod r-1: 3 audit lines, chain intact, ending at Run r's head",
        "verified: pod r-2: 2 audit lines, chain intact, ending at Run r's head",
    ]
    assert err.getvalue() == ""


def test_a_gone_pod_is_not_verified_and_named() -> None:
    kube, _ = _resumed(gone=("r-1",))
    console, out, err = _console()
    assert logs.verify_log(kube, "r", None, console) == EXIT_FINDINGS
    assert "NOT verified: pod r-1: pod 'r-1' is gone" in err.getvalue()
    assert out.getvalue().startswith("verified: pod r-2: 2 audit lines")


def test_a_copy_of_every_pods_log_verifies_and_an_edit_names_the_chain_and_line(
    tmp_path: Path,
) -> None:
    kube, (first, second) = _resumed()
    held = tmp_path / "run.log"
    held.write_text(first + second, encoding="utf-8")
    console, out, _ = _console()
    assert logs.verify_log(kube, "r", str(held), console) == EXIT_OK
    assert f"verified: {held} (chain 2 of 2, pod r-2): 2 audit lines" in out.getvalue()

    held.write_text(first.replace('"tool": "t1"', '"tool": "tX"') + second, encoding="utf-8")
    console, out, err = _console()
    assert logs.verify_log(kube, "r", str(held), console) == EXIT_FINDINGS
    assert (
        f"NOT verified: {held} (chain 1 of 2, pod r-1): line 2 is not the line the run wrote"
        in err.getvalue()
    )
    assert f"verified: {held} (chain 2 of 2, pod r-2)" in out.getvalue()

    # the second pod's lines are numbered in the whole copy
    held.write_text(first + second.replace('"tool": "t0"', '"tool": "tX"'), encoding="utf-8")
    console, _, err = _console()
    assert logs.verify_log(kube, "r", str(held), console) == EXIT_FINDINGS
    assert "(chain 2 of 2, pod r-2): line 4 is not the line the run wrote" in err.getvalue()


def test_a_copy_of_one_pods_log_verifies_against_that_pods_head(tmp_path: Path) -> None:
    kube, (first, second) = _resumed()
    held = tmp_path / "r-1.log"
    held.write_text(first, encoding="utf-8")
    console, out, _ = _console()
    assert logs.verify_log(kube, "r", str(held), console) == EXIT_OK
    assert out.getvalue().startswith(f"verified: {held}: 3 audit lines, chain intact")
    held.write_text(first + second + second, encoding="utf-8")
    with pytest.raises(CommandError, match="holds 3 audit chains and Run has 2"):
        logs.verify_log(kube, "r", str(held), _console()[0])
