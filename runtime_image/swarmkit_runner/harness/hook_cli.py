"""The pre-tool-use hook command a harness runs before each built-in tool use.

Claude Code (``hooks.PreToolUse``, a ``command`` hook in ``--settings``) and Codex
(``hooks.PreToolUse`` in its config) start it with the hook input JSON on stdin
(``hook_event_name``, ``tool_name``, ``tool_input``, ``tool_use_id``, …). It hands that
input to the runner's decision point (:mod:`.hooks`, ``$SWARMKIT_HOOK_URL`` with the bearer
``$SWARMKIT_HOOK_TOKEN``) and prints the answer, a ``hookSpecificOutput`` with
``permissionDecision`` ``allow`` or ``deny`` and its reason (the format both CLIs read).

Gemini CLI (``hooks.BeforeTool``, ``hook_event_name: BeforeTool``) reads another answer: a
top-level ``decision`` (``block`` with its ``reason``), and an allow here is
``decision: allow`` with the tool's input handed back plus ``$SWARMKIT_HOOK_ALLOW`` under
:data:`ALLOW_KEY`: its policy file lets a built-in run only with that per-Run value in its
arguments, so a use this hook did not allow (it failed, timed out, printed nonsense) is
denied by the policy (see :mod:`.gemini_cli`).

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

#: The argument Gemini CLI's policy requires (its value ``$SWARMKIT_HOOK_ALLOW``).
ALLOW_KEY = "swarmkit_allow"
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


def for_gemini(body: bytes, answer: str) -> str:
    """The PreToolUse ``answer`` as Gemini CLI's BeforeTool reads it: an allow hands the
    tool's input back with the policy's allow value; anything else blocks."""
    decided = json.loads(answer)["hookSpecificOutput"]
    allow = os.environ.get("SWARMKIT_HOOK_ALLOW", "")
    tool_input = json.loads(body).get("tool_input")
    if decided["permissionDecision"] != "allow" or not allow or not isinstance(tool_input, dict):
        reason = decided.get("permissionDecisionReason") or "denied"
        return json.dumps({"decision": "block", "reason": str(reason)})
    if ALLOW_KEY in tool_input:  # the model may not supply the allow value itself
        return json.dumps({"decision": "block", "reason": f"{ALLOW_KEY} is reserved"})
    allowed = {**tool_input, ALLOW_KEY: allow}
    return json.dumps({"decision": "allow", "hookSpecificOutput": {"tool_input": allowed}})


def is_gemini(body: bytes) -> bool:
    try:
        hook = json.loads(body)
    except ValueError:
        return False
    return isinstance(hook, dict) and hook.get("hook_event_name") == "BeforeTool"


def main() -> int:
    url = os.environ.get("SWARMKIT_HOOK_URL", "")
    token = os.environ.get("SWARMKIT_HOOK_TOKEN", "")
    body = sys.stdin.buffer.read()
    if not url or not token:
        answer = deny("no decision point is configured for built-in tools")
    else:
        answer = ask(body, url, token)
    print(for_gemini(body, answer) if is_gemini(body) else answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
