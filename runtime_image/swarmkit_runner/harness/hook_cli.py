"""The pre-tool-use hook command a harness runs before each built-in tool use.

Claude Code (``hooks.PreToolUse``, a ``command`` hook in ``--settings``) and Codex
(``hooks.PreToolUse`` in its config) start it with the hook input JSON on stdin
(``hook_event_name``, ``tool_name``, ``tool_input``, ``tool_use_id``, …). It hands that
input to the runner's decision point (:mod:`.hooks`, ``$SWARMKIT_HOOK_URL`` with the bearer
``$SWARMKIT_HOOK_TOKEN``) and prints the answer, a ``hookSpecificOutput`` with
``permissionDecision`` ``allow`` or ``deny`` and its reason (the format both CLIs read).

It fails closed: when the decision point cannot be reached or answers anything else, it
prints a ``deny`` saying why. It is run as a file by the runner's interpreter in isolated
mode (``python -I <this file>``) under the harness's environment, so it imports nothing but
the standard library.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

#: Seconds it waits for the decision (a strict tier parks the Run at once; this is a bound).
TIMEOUT_SECONDS = 600


def deny(reason: str) -> str:
    """A PreToolUse answer that denies the use, saying why."""
    return json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
    )


def ask(body: bytes, url: str, token: str) -> str:
    """The decision point's answer to ``body`` (a deny when there is none)."""
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            answer: str = response.read().decode("utf-8")
    except (OSError, urllib.error.URLError) as exc:
        return deny(f"the runner's decision point did not answer: {exc}")
    try:
        decided = json.loads(answer)["hookSpecificOutput"]["permissionDecision"]
    except (ValueError, KeyError, TypeError):
        decided = None
    if decided not in ("allow", "deny"):
        return deny("the runner's decision point gave no decision")
    return answer


def main() -> int:
    url = os.environ.get("SWARMKIT_HOOK_URL", "")
    token = os.environ.get("SWARMKIT_HOOK_TOKEN", "")
    body = sys.stdin.buffer.read()
    if not url or not token:
        print(deny("no decision point is configured for built-in tools"))
        return 0
    print(ask(body, url, token))
    return 0


if __name__ == "__main__":
    sys.exit(main())
