"""A skill description longer than the Agent Skills limit: cut, the rest kept in the body.

The specification caps ``description`` at 1,024 characters and the Skill CRD enforces it,
because every granted agent carries every description in its system prompt (level 1). Real
collections hold longer ones (Anthropic's ``claude-api``), and refusing the skill would lose
it. The import keeps all of the text: the description is cut at the limit (at the last word
break near it) and the remainder opens ``instructions``, which the agent reads with
``load_skill`` (level 2). A warning in the import report says so, with both lengths.
"""

from __future__ import annotations

from swarmkit_api.skill import MAX_DESCRIPTION_CHARS

from .mapping import Fields

#: Where the cut may move back to a word break (never further than this from the limit).
_WORD_BREAK_WINDOW = 200
#: Marks the carried remainder at the top of the instructions.
CONTINUED = "_(description, continued)_ "


def fit_description(f: Fields, key: str, description: str, instructions: str) -> tuple[str, str]:
    """``(description, instructions)`` with the description within the limit.

    A description within the limit is returned unchanged. A longer one is cut and its
    remainder prepended to ``instructions``; ``f.warn`` reports it at ``key``.
    """
    if len(description) <= MAX_DESCRIPTION_CHARS:
        return description, instructions
    cut = description.rfind(" ", MAX_DESCRIPTION_CHARS - _WORD_BREAK_WINDOW, MAX_DESCRIPTION_CHARS)
    if cut <= 0:
        cut = MAX_DESCRIPTION_CHARS
    head, rest = description[:cut].rstrip(), description[cut:].strip()
    body = f"{CONTINUED}{rest}\n\n{instructions}" if instructions.strip() else f"{CONTINUED}{rest}"
    f.warn(
        key,
        f"{len(description):,} characters, over the {MAX_DESCRIPTION_CHARS:,} the Agent Skills "
        f"specification allows: imported cut at {len(head):,}; the other {len(rest):,} "
        "open the instructions (loaded with load_skill)",
    )
    return head, body
