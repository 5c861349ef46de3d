"""The Run side checks a Skill revision against the contentHash it pins (issue 46, item 1).

An Agent's render pins each granted skill as (revision ConfigMap, contentHash). Anyone who
may create ConfigMaps may delete ``skill-<name>-<hash8>`` and create another under its
name; the resolver (one for Runs, served Topologies and gateways) uses a revision only when
it is the operator's render of exactly that hash, else ``TamperedObject`` naming it. The
in-memory API (:mod:`tests.support.fake_k8s`) serves the ConfigMaps.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from swarmkit_api.conditions import REASON_TAMPERED_OBJECT
from swarmkit_operator.builders import OWNER_LABELS, ObjectRef, trust
from swarmkit_operator.builders.skill import (
    FILE_KEY_PREFIX,
    FILES_JSON,
    render_skill,
    revision_mismatch,
)
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.workload.resolve import Resolver
from tests.support.fake_k8s import FakeApi, fake_api

from .fixtures import examples

NS = "team-a"


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    return fake_api(monkeypatch)


def revision() -> tuple[str, dict[str, Any]]:
    """An example skill with files, rendered: (contentHash, its revision ConfigMap)."""
    docs = examples()
    name, doc = next(
        (n, d) for (k, n), d in docs.items() if k == "Skill" and d["spec"].get("files")
    )
    owner = ObjectRef("Skill", name, NS, f"uid-{name}")
    render = render_skill(owner, doc["spec"], {}, OperatorConfig())
    assert render.config_map is not None and render.content_hash is not None
    return render.content_hash, copy.deepcopy(render.config_map)


def skill_of(cm: dict[str, Any]) -> str:
    """The Skill a revision was rendered for (its owner label)."""
    return str(cm["metadata"]["labels"][OWNER_LABELS["Skill"]])


def resolver() -> Resolver:
    return Resolver(OperatorConfig(), None)  # type: ignore[arg-type]  # no index is read


async def test_the_operators_revision_is_used(api: FakeApi) -> None:
    digest, cm = revision()
    api.create(cm)
    data = await resolver().skill_revision(NS, skill_of(cm), cm["metadata"]["name"], digest)
    assert data == cm["data"]


@pytest.mark.parametrize(
    ("forge", "why"),
    [
        (lambda cm: cm.update(immutable=False), "not immutable"),
        (
            lambda cm: cm["data"].update({"SKILL.md": cm["data"]["SKILL.md"] + "\nrm -rf /\n"}),
            "hashes to",
        ),
        (
            lambda cm: cm["data"].update(
                {k: v + "# eve" for k, v in cm["data"].items() if k.startswith(FILE_KEY_PREFIX)}
            ),
            "does not have the sha256",
        ),
    ],
    ids=["mutable-copy", "other-instructions", "other-file-content"],
)
async def test_a_revision_recreated_by_someone_else_is_never_used(
    api: FakeApi, forge: Any, why: str
) -> None:
    digest, cm = revision()
    forge(cm)
    api.create(cm)
    name = cm["metadata"]["name"]
    with pytest.raises(trust.Refused) as refused:
        await resolver().skill_revision(NS, skill_of(cm), name, digest)
    assert refused.value.reason == REASON_TAMPERED_OBJECT
    assert f"ConfigMap {name}" in refused.value.message and why in refused.value.message


def test_the_check_is_of_the_pinned_hash_not_of_the_name() -> None:
    digest, cm = revision()
    assert revision_mismatch(cm["data"], True, digest) is None
    other = "0" * 64
    assert "pinned contentHash is 000000000000" in str(revision_mismatch(cm["data"], True, other))
    broken = {k: v for k, v in cm["data"].items() if k != FILES_JSON}
    assert revision_mismatch(broken, True, digest) is not None
