"""``kubectl swarmkit review``: usage errors need no cluster (the rest: integration tests)."""

from __future__ import annotations

import pytest

from tests.unit.cli.support import run_cli


def test_answer_needs_text_and_decisions_need_a_name() -> None:
    no_text = run_cli("review", "answer", "ship-it-1")
    assert no_text.code == 2 and "review answer needs --text" in no_text.err
    no_name = run_cli("review", "approve")
    assert no_name.code == 2 and "review approve needs the Review's name" in no_name.err


def test_unknown_action_is_a_usage_error() -> None:
    assert run_cli("review", "maybe", "x").code == 2


def _gate_review(round_: int, diff: str, rounds: list[dict[str, object]]) -> dict[str, object]:
    roles = {"security": {"users": ["sam"]}, "product": {"users": ["paula"]}}
    gate = {
        "funnel": "notes",
        "approve": {
            "rules": [
                {"roles": ["security"], "quorum": "all"},
                {"roles": ["product"], "quorum": "all"},
            ],
            "roles": roles,
            "onRevision": "reconfirmChanged",
        },
        "author": "eve",
        "report": {"funnel": "notes", "node": "draft", "artifact": "{}", "round": round_,
                   "diff": diff},
        "rounds": rounds,
    }  # fmt: skip
    request = {"kind": "funnel_approval", "question": "?", "gate": gate}
    return {"metadata": {"name": "r-2"}, "spec": {"request": request, "approvals": []}}


def test_show_prints_the_revision_history_carried_signatures_and_an_unchanged_artifact() -> None:
    import io

    from swarmkit_cli import review_gate
    from swarmkit_cli.console import Console

    sam = {"verdict": "approve", "role": "security", "decidedBy": "sam"}
    paula = {"verdict": "revise", "role": "product", "decidedBy": "paula", "text": "add numbers"}
    out = io.StringIO()
    review = _gate_review(2, "", [{"round": 1, "review": "r-1", "approvals": [sam, paula]}])
    review_gate.show(review, Console(out=out, err=io.StringIO()))
    text = out.getvalue()
    assert "Round:       2 (onRevision: reconfirmChanged)" in text
    assert "round 1 (r-1): revision asked by paula as product: add numbers" in text
    # the security rule was not touched by product's revision: sam's signature carries
    assert "rule 1 (all of security): ok; signed security: sam" in text
    assert "carried over: sam as security (round 1)" in text
    assert "rule 2 (all of product): missing" in text
    assert "Diff since round 1: none (the artifact is unchanged)" in text


def test_revise_needs_text() -> None:
    from swarmkit_cli import review_gate
    from swarmkit_cli.console import Console
    from swarmkit_cli.plugin import UsageError

    review = _gate_review(1, "", [])
    review["metadata"] = {"name": "r-2", "resourceVersion": "1"}
    with pytest.raises(UsageError, match="review revise r-2 needs --text"):
        review_gate.sign(None, Console(), review, "revise", "product", None, "paula")


def test_a_signature_is_re_read_and_re_sent_when_the_review_changed_meanwhile() -> None:
    """The Review's resourceVersion moves under a signer: another person signed, or the
    operator wrote the quorum to its status (seen in CI: a 409 on the first signature of a
    Review the operator had just updated). The signature is appended to the fresh list, so
    neither is lost."""
    from kubernetes.client.exceptions import ApiException

    from swarmkit_cli import review_gate
    from swarmkit_cli.console import Console

    sam = {"verdict": "approve", "role": "security", "decidedBy": "sam"}
    stale = _gate_review(1, "", [])
    stale["metadata"] = {"name": "r-2", "resourceVersion": "7"}
    fresh = _gate_review(1, "", [])
    fresh["metadata"] = {"name": "r-2", "resourceVersion": "9"}
    fresh["spec"]["approvals"] = [sam]  # type: ignore[index]
    sent: list[dict[str, object]] = []

    class Custom:
        def patch_namespaced_custom_object(self, *args: object) -> None:
            body = args[-1]
            assert isinstance(body, dict)
            sent.append(body)
            if body["metadata"]["resourceVersion"] != "9":
                raise ApiException(status=409, reason="Conflict")

        def get_namespaced_custom_object(self, *args: object) -> dict[str, object]:
            return fresh

    class Kube:
        namespace = "team-a"
        custom = Custom()

    code = review_gate.sign(Kube(), Console(), stale, "approve", "product", None, "paula")
    assert code == 0
    paula = {"verdict": "approve", "role": "product", "decidedBy": "paula"}
    assert [b["spec"]["approvals"] for b in sent] == [[paula], [sam, paula]]  # type: ignore[index]
