"""JSON Schema checks: tool arguments and an agent's final answer (``outputSchema``).

An agent with an ``outputSchema`` must answer with JSON that matches it. A non-matching
answer is sent back to the model with field-specific messages and retried
(:data:`OUTPUT_RETRIES` times); after that the run fails with the first problem.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

OUTPUT_RETRIES = 2
MAX_MESSAGES = 5


def schema_problems(schema: dict[str, Any], value: Any) -> list[str]:
    """``path: message`` for each way ``value`` violates ``schema`` (at most 5)."""
    # Imported lazily (start-up cost) and untyped (no stubs needed in the image).
    jsonschema: Any = importlib.import_module("jsonschema")
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.path])
    return [f"{'.'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors][
        :MAX_MESSAGES
    ]


def parse_answer(text: str) -> Any:
    """The JSON in an answer (a ```json fence around it is accepted); raises ValueError."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = stripped.rsplit("```", 1)[0]
    return json.loads(stripped)


def answer_problems(schema: dict[str, Any], text: str) -> list[str]:
    """Why ``text`` is not an answer matching ``schema`` (empty when it is)."""
    try:
        value = parse_answer(text)
    except ValueError as exc:
        return [f"(root): the answer is not valid JSON ({exc})"]
    return schema_problems(schema, value)


def feedback(schema: dict[str, Any], problems: list[str]) -> str:
    """The message that asks the model to fix its answer."""
    lines = "\n".join(f"- {p}" for p in problems)
    return (
        "Your final answer must be only JSON matching this JSON Schema:\n"
        f"{json.dumps(schema)}\nProblems:\n{lines}\nAnswer again with corrected JSON only."
    )
