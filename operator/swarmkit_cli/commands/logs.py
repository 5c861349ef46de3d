"""``kubectl swarmkit logs run/NAME``: a Run's audit lines, human-readable.

The runner writes one JSON object per event on stdout; this reads them from the Run's pod
(``status.podName``, the same API ``kubectl logs`` uses) and prints time, agent, event,
tool (or skill), outcome and duration per line. ``-o json`` prints the audit lines as they
are (one JSON object per line, for ``jq``); ``-f`` follows a running Run until its pod
ends, waiting for the pod to start first. A traced Run's trace id (``status.traceId``) is
printed first, on stderr (``trace: <id>``: look it up in Jaeger or any OTLP backend).

``--verify`` checks instead of printing: the audit lines are hash-chained (each names the
hash of the one before, the first is bound to the Run's uid) and the Run's status holds each
pod's chain head (``status.audit``: a resumed Run has one chain per pod). With ``--file
PATH`` (``-`` for stdin) it checks a copy a person holds (e.g. saved with ``-o json``): one
pod's log, or every pod's one after another; else each pod's log. Exit 0 when every chain
is the log the run wrote; 1 with, per chain that is not, the first line that is not
(changed, removed, moved) and why, or the pod whose log is gone.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable, Iterator
from typing import Any

from swarmkit_api.audit_chain import audit_lines, chains, line_hash, status_heads, verify
from swarmkit_api.conditions import SUCCEEDED

from ..console import Console
from ..plugin import (
    EXIT_FINDINGS,
    EXIT_OK,
    CommandError,
    UsageError,
    add_command,
    add_namespace_flag,
)

GOOD_OUTCOMES = {"ok", "succeeded", "approved", "true"}
BAD_MARKS = ("fail", "error", "refused", "timedout", "cancel", "exceeded", "invalid")
COLUMNS = (
    ("TIME", 12),
    ("AGENT", 18),
    ("EVENT", 22),
    ("TOOL", 26),
    ("OUTCOME", 14),
    ("DURATION", 9),
)
#: Fields shown in their own column; everything else short goes into DETAIL.
SHOWN = {
    "ts",
    "event",
    "agent",
    "tool",
    "skill",
    "outcome",
    "duration_ms",
    "run_id",
    "correlation_id",
    "parent_run_id",
}
DETAIL_KEYS = (
    "message",
    "reason",
    "model",
    "stop_reason",
    "path",
    "target",
    "server",
    "error",
    "steps",
    "tool_calls",
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "logs",
        run,
        help="a Run's audit lines: time, agent, event, tool, outcome, duration",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("run", metavar="run/NAME", help="the Run (run/NAME or NAME)")
    add_namespace_flag(parser)
    parser.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default="text",
        help="text (default) or json: the raw audit lines",
    )
    parser.add_argument(
        "-f", "--follow", action="store_true", help="follow the Run until its pod ends"
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="with -f: how long to wait for the Run's pod to start (120)",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check the log against the chain head in the Run's status (exit 1 if altered)",
    )
    parser.add_argument(
        "--file",
        metavar="PATH",
        help="with --verify: the copy to check ('-' for stdin) instead of the pod's log",
    )


def run_name(ref: str) -> str:
    kind, sep, name = ref.partition("/")
    if not sep:
        return ref
    if kind.lower() not in ("run", "runs", "skr", "run.swarmkit.dev", "runs.swarmkit.dev"):
        raise UsageError(f"{ref!r}: expected run/NAME")
    if not name:
        raise UsageError(f"{ref!r}: missing the Run's name")
    return name


def run(args: argparse.Namespace, console: Console) -> int:
    from ..kube import connect

    name = run_name(args.run)
    if args.file and not args.verify:
        raise UsageError("--file is for --verify")
    if args.verify and args.follow:
        raise UsageError("--verify checks a finished Run's log: drop -f")
    kube = connect(
        args.kubeconfig,
        args.namespace,
        context=args.context,
        as_user=args.as_user,
        as_group=args.as_group,
    )
    try:
        if args.verify:
            return verify_log(kube, name, args.file, console)
        pod = _pod_of(kube, name, args.follow, args.wait)
        trace_id = (kube.get("Run", name).get("status") or {}).get("traceId")
        if trace_id:  # to stderr: stdout stays the audit lines (-o json pipes them on)
            console.info(f"trace: {trace_id}")
        lines = _pod_lines(kube, pod, args.follow)
        if args.output == "json":
            for line in lines:
                if parse(line) is not None:
                    console.write(line + "\n")
                elif line.strip():
                    console.info(line)
        else:
            console.print(header())
            for line in lines:
                record = parse(line)
                if record is None:
                    if line.strip():
                        console.print(console.style(line, "dim"))
                    continue
                console.write(render(record, console) + "\n")
    finally:
        kube.close()
    return EXIT_OK


def verify_log(kube: Any, name: str, path: str | None, console: Console) -> int:
    """``--verify``: each pod's log, or the copy at ``path``, against ``status.audit``."""
    run = kube.get("Run", name)
    heads = status_heads((run.get("status") or {}).get("audit"))
    if not heads:
        raise CommandError(
            f"Run {name!r} has no audit chain head in its status yet (it has not ended a "
            "stage, or its runner predates hash-chained audit lines): nothing to verify against"
        )
    uid = str((run.get("metadata") or {}).get("uid") or "")
    if path:
        checks = _held_checks(_held_lines(path), uid, heads, "stdin" if path == "-" else path)
    else:
        latest = str((run.get("status") or {}).get("podName") or "")
        pods = [str(h.get("pod") or latest) for h in heads]  # no pod named: the latest's
        checks = [(f"pod {p}", 1, _pod_copy(kube, p), h) for p, h in zip(pods, heads, strict=True)]
    failed = 0
    for source, first, lines, head in checks:
        if isinstance(lines, str):  # no log to check: the pod is gone, or it is unreadable
            console.error(f"NOT verified: {source}: {lines}")
            failed += 1
            continue
        result = verify(lines, uid, str(head["head"]), int(head.get("lines") or 0), first)
        if result.ok:
            console.print(f"verified: {source}: {result.message}, ending at Run {name}'s head")
        else:
            console.error(f"NOT verified: {source}: {result.message}")
            failed += 1
    return EXIT_FINDINGS if failed else EXIT_OK


#: (what is checked, its first line number, its lines or why there are none, its head)
Check = tuple[str, int, list[str] | str, dict[str, Any]]


def _held_checks(
    lines: list[str], uid: str, heads: list[dict[str, Any]], source: str
) -> list[Check]:
    """What to hold a copy against: a copy of every pod's log (its chains in order) against
    each head; a copy of one pod's log against the head it ends at (else the latest)."""
    found = chains(lines, uid)
    if len(found) == len(heads) and len(heads) > 1:
        return [
            (f"{source} (chain {i} of {len(heads)}, pod {h.get('pod')})", first, part, h)
            for i, ((first, part), h) in enumerate(zip(found, heads, strict=True), start=1)
        ]
    if len(found) > 1:
        raise CommandError(
            f"{source} holds {len(found)} audit chains and Run has {len(heads)} (one per pod): "
            "check one pod's copy, or every pod's one after another, oldest first"
        )
    chained = audit_lines(lines)
    last = line_hash(chained[-1][1]) if chained else None
    head = next((h for h in heads if h["head"] == last), heads[-1])
    return [(source, 1, lines, head)]


def _pod_copy(kube: Any, pod: str) -> list[str] | str:
    """The pod's log lines, or why there are none."""
    try:
        return list(_pod_lines(kube, pod, False))
    except CommandError as exc:
        return str(exc)


def _held_lines(path: str) -> list[str]:
    import sys

    if path == "-":
        return sys.stdin.read().split("\n")
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return fh.read().split("\n")
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None


def _pod_of(kube: Any, name: str, follow: bool, wait: float) -> str:
    deadline = time.monotonic() + (wait if follow else 0)
    while True:
        status = kube.get("Run", name).get("status") or {}
        pod = status.get("podName")
        if pod:
            if not follow or _pod_started(kube, pod) or time.monotonic() >= deadline:
                return str(pod)
        elif time.monotonic() >= deadline:
            conds = {c.get("type"): c for c in status.get("conditions") or []}
            why = conds.get(SUCCEEDED, {}).get("message") or "it has not started"
            raise CommandError(f"Run {name!r} has no pod yet: {why}")
        time.sleep(0.5)


def _pod_started(kube: Any, pod: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        phase = kube.core.read_namespaced_pod(pod, kube.namespace).status.phase
    except ApiException:
        return False
    return phase in ("Running", "Succeeded", "Failed")


def _pod_lines(kube: Any, pod: str, follow: bool) -> Iterator[str]:
    from kubernetes.client.exceptions import ApiException

    try:
        # Raw bytes, split at b"\n" only: the lines exactly as written (what --verify hashes;
        # a line may hold U+2028 and the like, which JSON leaves raw).
        resp = kube.core.read_namespaced_pod_log(
            pod, kube.namespace, follow=follow, _preload_content=False
        )
    except ApiException as exc:
        if exc.status == 404:
            raise CommandError(
                f"pod {pod!r} is gone (deleted with its Job after ttlSecondsAfterFinished); "
                "its audit lines went with it"
            ) from None
        raise CommandError(f"reading the logs of pod {pod!r}: {exc.status} {exc.reason}") from None
    try:
        yield from _split(resp.stream(amt=4096, decode_content=True))
    finally:
        resp.release_conn()


def _split(chunks: Iterable[bytes]) -> Iterator[str]:
    buf = b""
    for chunk in chunks:
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            yield line.decode("utf-8", errors="replace")
    if buf:
        yield buf.decode("utf-8", errors="replace")


def parse(line: str) -> dict[str, Any] | None:
    """An audit record, or None for a line that is not one (stderr noise, tracebacks)."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and "event" in record else None


def header() -> str:
    return "  ".join(h.ljust(w) for h, w in COLUMNS) + "  DETAIL"


def duration(ms: Any) -> str:
    if not isinstance(ms, int | float):
        return ""
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.1f}s"


def render(record: dict[str, Any], console: Console) -> str:
    """One audit record as a fixed-width line (fixed so ``-f`` can print as lines arrive)."""
    ts = str(record.get("ts", ""))
    clock = ts[11:23] if len(ts) >= 23 and ts[10] == "T" else ts
    tool = record.get("tool") or record.get("skill") or ""
    outcome = str(record.get("outcome", "") or "")
    cells = [
        clock,
        str(record.get("agent", "") or ""),
        str(record["event"]),
        str(tool),
        outcome,
        duration(record.get("duration_ms")),
    ]
    parts = []
    for (_, width), cell in zip(COLUMNS, cells, strict=True):
        text = cell if len(cell) <= width else cell[: width - 1] + "…"
        padded = text.ljust(width)
        if cell is outcome and outcome:
            padded = console.style(padded, outcome_style(outcome))
        parts.append(padded)
    details = [f"{k}={_short(record[k])}" for k in DETAIL_KEYS if k in record]
    return ("  ".join(parts) + "  " + " ".join(details)).rstrip()


def outcome_style(outcome: str) -> str:
    low = outcome.lower()
    if low in GOOD_OUTCOMES:
        return "green"
    return "red" if any(m in low for m in BAD_MARKS) else "yellow"


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
