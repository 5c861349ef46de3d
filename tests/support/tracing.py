"""Reading traces back from the real Jaeger (``swarmkit_devcluster.jaeger``) in tests."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any


def new_traceparent() -> tuple[str, str, str]:
    """A fresh sampled ``traceparent`` and its trace id and span id."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


@dataclass(frozen=True)
class SpanView:
    """One span as Jaeger's query API returns it, tags flattened."""

    raw: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.raw["operationName"])

    @property
    def span_id(self) -> str:
        return str(self.raw["spanID"])

    @property
    def parent_id(self) -> str | None:
        for ref in self.raw.get("references") or ():
            if ref.get("refType") == "CHILD_OF":
                return str(ref["spanID"])
        return None

    @property
    def tags(self) -> dict[str, Any]:
        return {t["key"]: t["value"] for t in self.raw.get("tags") or ()}

    @property
    def service(self) -> str:
        return str((self.raw.get("process") or {}).get("serviceName", ""))

    @property
    def process_id(self) -> str:
        """Jaeger's id of the emitting process (one per runner process and service)."""
        process = self.raw.get("process") or {}
        return json.dumps(process.get("tags") or [], sort_keys=True) + self.service

    @property
    def start(self) -> int:
        return int(self.raw.get("startTime") or 0)

    def tag(self, key: str) -> Any:
        return self.tags.get(key)

    def string_list(self, key: str) -> list[str]:
        """An array attribute (Jaeger shows it as a JSON string)."""
        value = self.tags.get(key)
        return list(json.loads(value)) if isinstance(value, str) else list(value or [])


def views(spans: list[dict[str, Any]]) -> list[SpanView]:
    return [SpanView(s) for s in spans]


def by_name(spans: list[SpanView], name: str) -> list[SpanView]:
    return [s for s in spans if s.name == name]


def one(spans: list[SpanView], name: str) -> SpanView:
    found = by_name(spans, name)
    assert len(found) == 1, f"{len(found)} spans named {name!r} in {[s.name for s in spans]}"
    return found[0]
