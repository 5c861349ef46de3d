"""The audit stream: one JSON object per line on stdout, one line per event.

Every line carries ``ts``, ``event``, ``run_id`` (the Run's uid), ``correlation_id`` and,
where they apply, ``agent``, ``skill``, ``tool``, ``duration_ms`` and ``outcome``. Inputs and
outputs of a call are included per the skill's ``audit`` policy with its ``redact`` paths
(``input.password``, ``output.items.*.token``) replaced by ``[REDACTED]``; every known secret
value is scrubbed from the whole line.

Event names: ``run.start``, ``run.end``, ``startup.warning``, ``mcp.ready``,
``mcp.unavailable``, ``agent.start``, ``agent.end``, ``model.call``, ``model.retry``,
``model.continued``, ``model.truncated``,
``tool.call``, ``tool.refused``, ``skill.load``, ``skill.file_read``, ``script.run``,
``script.refused``, ``limit.exceeded``; skill semantics add ``skill.call`` (a composed
skill's component), ``skill.retry``, ``skill.failed``, ``constraint.violation``,
``output.validated``, ``output.validation_failed``, ``consensus``, ``command.run``,
``child_run``, ``a2a.card``, ``a2a.send``, ``a2a.task``, ``a2a.cancel``,
``executor.input_request``, ``executor.input_response`` and ``review.requested``.

The lines are hash-chained (:mod:`swarmkit_api.audit_chain`): each starts with ``prev``, the
sha256 of the audit line before it on the stream (the first line's is bound to the run id),
and :attr:`AuditLog.head` is the chain's end, which the run's result reports
(:func:`.result.write_termination_log`) and the operator keeps in the Run's status.

A child run (an agent skill running a local topology) writes to the same stream with its
own ``run_id`` and a ``parent_run_id`` (:meth:`AuditLog.child`); the correlation id is
the parent's. A gateway session (:mod:`.gateway`) writes with its own correlation id and
its ``session`` and ``identity`` (the bearer token's name) on every line
(:meth:`AuditLog.session`); the gateway adds ``gateway.start``, ``gateway.stop``,
``session.start`` and ``auth.refused``.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TextIO

from swarmkit_api.audit_chain import anchor, line_hash, link
from swarmkit_api.run import AuditChainHead
from swarmkit_api.skill import AuditPolicy

from .secrets import MIN_SCRUB_LENGTH, REDACTED, SecretStore

#: Longest string kept in an audit line (inputs, outputs, messages).
MAX_AUDIT_STRING = 4096
TRUNCATED = "…[truncated]"


def cap(value: Any, limit: int = MAX_AUDIT_STRING) -> Any:
    """``value`` with long strings cut; large structures are kept up to ``limit`` chars."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + TRUNCATED
    if isinstance(value, dict | list):
        text = json.dumps(value, ensure_ascii=False, default=str)
        if len(text) <= limit:
            return value
        return text[:limit] + TRUNCATED
    return value


def _redact_path(node: Any, parts: list[str]) -> Any:
    if not parts:
        return REDACTED
    head, rest = parts[0], parts[1:]
    if isinstance(node, dict):
        keys = list(node) if head == "*" else [head] if head in node else []
        return {k: (_redact_path(v, rest) if k in keys else v) for k, v in node.items()}
    if isinstance(node, list):
        if head == "*":
            return [_redact_path(v, rest) for v in node]
        if head.isdigit() and int(head) < len(node):
            i = int(head)
            return [(_redact_path(v, rest) if n == i else v) for n, v in enumerate(node)]
    return node


def redact(record: dict[str, Any], paths: Iterable[str]) -> dict[str, Any]:
    """``record`` with every dotted ``path`` (``*`` matches any key or index) redacted."""
    out: Any = record
    for path in paths:
        parts = [p for p in path.split(".") if p]
        if parts:
            out = _redact_path(out, parts)
    result: dict[str, Any] = out
    return result


def _as_json(text: str) -> Any:
    """Tool output as JSON when it is a JSON object or array (so ``output.x`` paths work)."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


class _Chain:
    """One stream's hash chain: the hash of the last line written and how many were.

    Shared by every :class:`AuditLog` writing to the stream (a child run's, a session's),
    so their lines form one chain in the order they reach the sink."""

    def __init__(self, run_id: str) -> None:
        self.lock = threading.Lock()
        self.prev = anchor(run_id)
        self.lines = 0


class AuditLog:
    """Writes audit events as hash-chained JSON lines (thread-safe, flushed per line)."""

    def __init__(
        self,
        run_id: str,
        correlation_id: str,
        secrets: SecretStore | None = None,
        sink: TextIO | None = None,
        clock: Callable[[], datetime] | None = None,
        parent_run_id: str | None = None,
        fields: dict[str, Any] | None = None,
    ) -> None:
        self.run_id = run_id
        #: Written into every line (a gateway session's ``session`` and ``identity``).
        self.fields = dict(fields or {})
        self.correlation_id = correlation_id
        self.parent_run_id = parent_run_id
        self._secrets = secrets or SecretStore({})
        self._sink = sink
        self._clock = clock or (lambda: datetime.now(UTC))
        self._chain = _Chain(run_id)
        self._broken = False

    def child(self, run_id: str) -> AuditLog:
        """The audit stream of a child run: same sink and lock, its own run id."""
        log = AuditLog(
            run_id,
            self.correlation_id,
            self._secrets,
            self._sink,
            self._clock,
            parent_run_id=self.run_id,
            fields=self.fields,
        )
        log._chain = self._chain
        return log

    def session(self, correlation_id: str, **fields: Any) -> AuditLog:
        """The stream of one gateway session: same sink, lock and run id, its own
        correlation id, and ``fields`` (e.g. the caller's identity) on every line."""
        log = AuditLog(
            self.run_id,
            correlation_id,
            self._secrets,
            self._sink,
            self._clock,
            parent_run_id=self.parent_run_id,
            fields={**self.fields, **fields},
        )
        log._chain = self._chain
        return log

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        """Write one event; ``None`` fields are left out."""
        record: dict[str, Any] = {
            "ts": self._clock().isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "event": event,
            "run_id": self.run_id,
            "correlation_id": self.correlation_id,
        }
        if self.parent_run_id is not None:
            record["parent_run_id"] = self.parent_run_id
        record.update(self.fields)
        record.update({k: cap(v) for k, v in fields.items() if v is not None})
        # Scrubbed before the hash goes in: the hash is of the line as written.
        body = self._secrets.scrub(json.dumps(record, ensure_ascii=False, default=str))
        sink = self._sink if self._sink is not None else sys.stdout
        with self._chain.lock:
            prev = self._chain.prev
            line = link(body, prev)
            try:
                sink.write(line + "\n")
                sink.flush()
            except (OSError, ValueError) as exc:  # a closed stdout must not end the run
                if not self._broken:
                    self._broken = True
                    print(f"swarmkit-runner: audit stream broken: {exc}", file=sys.stderr)
            else:
                self._chain.prev = line_hash(line)
                self._chain.lines += 1
        return {"prev": prev, **record}

    @property
    def head(self) -> AuditChainHead:
        """The chain's end so far: the hash of the last line written and the line count."""
        with self._chain.lock:
            return AuditChainHead(head=self._chain.prev, lines=self._chain.lines)

    def write_raw(self, line: str) -> None:
        """One non-JSON line on the same stream (the checkpoint line: already scrubbed)."""
        sink = self._sink if self._sink is not None else sys.stdout
        with self._chain.lock:
            try:
                sink.write(line + "\n")
                sink.flush()
            except (OSError, ValueError) as exc:
                print(f"swarmkit-runner: cannot write to the audit stream: {exc}", file=sys.stderr)

    def call_fields(
        self,
        policy: AuditPolicy | None,
        arguments: dict[str, Any] | None,
        output: str | None,
    ) -> dict[str, Any]:
        """The ``input``/``output`` fields of a call event under ``policy`` (with redaction)."""
        policy = policy or AuditPolicy()
        record: dict[str, Any] = {}
        if policy.log_inputs and arguments is not None:
            record["input"] = arguments
        if policy.log_outputs and output is not None:
            record["output"] = _as_json(output)
        if policy.redact:
            record = redact(record, policy.redact)
        return record


def warn_short_secrets(audit: AuditLog, secrets: SecretStore) -> None:
    """A ``startup.warning`` per secret too short to be scrubbed (its variable, never it)."""
    for name in secrets.too_short():
        audit.emit(
            "startup.warning",
            message=f"the value of {name} is shorter than {MIN_SCRUB_LENGTH} characters: "
            "it is not scrubbed from output (use a longer secret)",
            variable=name,
        )
