"""Skill rendering: content hash, key scheme, size limit, script approval."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import yaml

from swarmkit_api.skill import MAX_SKILL_BYTES
from swarmkit_api.workspace import Governance, ScriptDeny
from swarmkit_operator.builders import ObjectRef, config_map_size
from swarmkit_operator.builders.skill import (
    PART_BUDGET,
    PART_OF,
    SourceConfigMap,
    load_rendered_skill,
    referenced_config_maps,
    render_skill,
    scripts_verdict,
    workspace_script_verdict,
)
from swarmkit_operator.config import AllowedScript, OperatorConfig
from swarmkit_operator.hashing import sha256_hex

OWNER = ObjectRef("Skill", "incident-triage", "team-a", "uid-1")
SCRIPT = "print('sev2')\n"


def spec(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "description": "Use when an incident is reported.",
        "category": "capability",
        "instructions": "# Triage\n\n1. Ask.\n",
        "provenance": {"authoredBy": "human", "version": "1.0.0"},
        "files": [
            {"path": "scripts/classify.py", "content": SCRIPT},
            {"path": "reference/matrix.md", "content": "| Sev1 | all |\n"},
        ],
    }
    base.update(extra)
    return base


def verdicts(render: Any) -> dict[str, tuple[str, str]]:
    return {v.type: (v.status, v.reason) for v in render.verdicts}


def test_renders_immutable_content_addressed_config_map() -> None:
    render = render_skill(OWNER, spec(), {}, OperatorConfig())
    cm = render.config_map
    assert cm is not None and render.content_hash is not None
    assert cm["immutable"] is True
    assert cm["metadata"]["name"] == f"skill-incident-triage-{render.content_hash[:8]}"
    assert cm["metadata"]["labels"]["swarmkit.dev/skill"] == "incident-triage"
    assert cm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "swarmkit-operator"
    # no ownerReference: a Run's pin keeps it after the Skill is deleted (issue 47)
    assert "ownerReferences" not in cm["metadata"]
    data = cm["data"]
    assert all("/" not in key for key in data)
    files = json.loads(data["files.json"])
    assert [f["path"] for f in files] == ["reference/matrix.md", "scripts/classify.py"]
    by_path = {f["path"]: f for f in files}
    assert data[by_path["scripts/classify.py"]["key"]] == SCRIPT
    assert by_path["scripts/classify.py"]["isScript"] is True
    assert by_path["scripts/classify.py"]["sha256"] == sha256_hex(SCRIPT)
    assert data["SKILL.md"].startswith("---\nname: incident-triage\ndescription: Use when")
    assert data["SKILL.md"].endswith("---\n\n# Triage\n\n1. Ask.\n")
    on_disk = yaml.safe_load(data["skill.yaml"])
    assert "instructions" not in on_disk and "files" not in on_disk
    assert render.version == render.content_hash[:12]
    assert verdicts(render)["Ready"] == ("True", "Rendered")


def test_round_trip_through_the_config_map() -> None:
    render = render_skill(OWNER, spec(), {}, OperatorConfig())
    assert render.config_map is not None
    loaded = load_rendered_skill(render.config_map["data"])
    assert loaded.name == "incident-triage"
    assert loaded.spec.instructions == "# Triage\n\n1. Ask.\n"
    assert {f.path for f in loaded.files} == {"scripts/classify.py", "reference/matrix.md"}


def test_hash_ignores_defaults_and_file_order_but_not_content() -> None:
    a = render_skill(OWNER, spec(), {}, OperatorConfig())
    reordered = spec()
    reordered["files"] = list(reversed(reordered["files"]))
    reordered["audit"] = None
    reordered.pop("audit")
    b = render_skill(OWNER, reordered, {}, OperatorConfig())
    assert a.content_hash == b.content_hash
    explicit = spec(
        files=[
            {"path": "scripts/classify.py", "content": SCRIPT, "executable": False},
            {"path": "reference/matrix.md", "content": "| Sev1 | all |\n"},
        ]
    )
    assert render_skill(OWNER, explicit, {}, OperatorConfig()).content_hash == a.content_hash
    for changed in (
        spec(instructions="other"),
        spec(files=[{"path": "scripts/classify.py", "content": SCRIPT + "#\n"}]),
        spec(description="Use when something else."),
    ):
        assert render_skill(OWNER, changed, {}, OperatorConfig()).content_hash != a.content_hash


def test_files_from_config_maps_including_binary() -> None:
    raw = bytes(range(256))
    s = spec(
        files=[
            {"path": "data/table.csv", "configMapRef": {"name": "src", "key": "table.csv"}},
            {"path": "data/blob.bin", "configMapRef": {"name": "src", "key": "blob"}},
        ]
    )
    source = SourceConfigMap(
        data={"table.csv": "a,b\n"}, binary_data={"blob": base64.b64encode(raw).decode()}
    )
    assert referenced_config_maps(s) == {"src"}
    render = render_skill(OWNER, s, {"src": source}, OperatorConfig())
    assert render.config_map is not None
    files = {f.path: f for f in render.files}
    assert files["data/blob.bin"].binary and files["data/blob.bin"].sha256 == sha256_hex(raw)
    assert render.config_map["binaryData"][files["data/blob.bin"].key]
    assert render.config_map["data"][files["data/table.csv"].key] == "a,b\n"


def test_missing_config_map_is_not_ready_and_renders_nothing() -> None:
    s = spec(files=[{"path": "a.md", "configMapRef": {"name": "src", "key": "a"}}])
    render = render_skill(OWNER, s, {"src": None}, OperatorConfig())
    assert render.config_map is None and render.content_hash is None
    assert verdicts(render)["Ready"] == ("False", "ConfigMapNotFound")
    assert "src" in next(v.message for v in render.verdicts if v.type == "Ready")
    render = render_skill(OWNER, s, {"src": SourceConfigMap({"b": ""})}, OperatorConfig())
    assert "no key 'a'" in next(v.message for v in render.verdicts if v.type == "Ready")


def test_too_large_is_rejected_and_nothing_rendered() -> None:
    # 17 files of 1,000,000 bytes: past MAX_SKILL_BYTES (16 MiB) all together.
    chunk = "x" * 1_000_000
    s = spec(
        files=[
            {"path": f"big/{i:02d}.txt", "configMapRef": {"name": f"m{i}", "key": "k"}}
            for i in range(17)
        ]
    )
    maps = {f"m{i}": SourceConfigMap({"k": chunk}) for i in range(17)}
    render = render_skill(OWNER, s, maps, OperatorConfig())
    assert verdicts(render)["Accepted"] == ("False", "TooLarge")
    assert verdicts(render)["Ready"] == ("False", "TooLarge")
    message = next(v.message for v in render.verdicts if v.type == "Accepted")
    assert "17000000 in 17 file(s)" in message
    assert f"over the {MAX_SKILL_BYTES}-byte limit; nothing rendered" in message
    assert render.config_map is None and render.status_fields()["renderedConfigMap"] is None
    assert render.parts == ()


def _large(n: int, size: int) -> tuple[dict[str, object], dict[str, SourceConfigMap | None]]:
    """A skill of ``n`` binary files of ``size`` bytes each (distinct bytes per file)."""
    files = [
        {"path": f"assets/{i:02d}.bin", "configMapRef": {"name": f"m{i}", "key": "k"}}
        for i in range(n)
    ]
    maps: dict[str, SourceConfigMap | None] = {
        f"m{i}": SourceConfigMap(binary_data={"k": base64.b64encode(bytes([i]) * size).decode()})
        for i in range(n)
    }
    return spec(files=files), maps


def test_a_large_skill_renders_into_parts_each_within_one_config_map() -> None:
    s, maps = _large(9, 900_000)  # 8.1 MB of files
    render = render_skill(OWNER, s, maps, OperatorConfig())
    assert verdicts(render)["Ready"] == ("True", "Rendered")
    head = render.config_map
    assert head is not None and len(render.parts) == 9
    assert "and 9 part ConfigMap(s)" in next(
        v.message for v in render.verdicts if v.type == "Ready"
    )
    for cm in (head, *render.parts):
        assert cm["immutable"] is True
        assert config_map_size(cm["data"], cm.get("binaryData")) <= PART_BUDGET
    entries = json.loads(head["data"]["files.json"])
    names = {p["metadata"]["name"] for p in render.parts}
    assert {e["configMap"] for e in entries} == names
    for part in render.parts:
        assert part["metadata"]["annotations"][PART_OF] == head["metadata"]["name"]
        assert part["metadata"]["name"].startswith(head["metadata"]["name"] + "-")
    # Byte for byte: every file's bytes are in the part files.json names, under its key.
    for i, e in enumerate(entries):
        part = next(p for p in render.parts if p["metadata"]["name"] == e["configMap"])
        raw = base64.b64decode(part["binaryData"][e["key"]])
        assert raw == bytes([i]) * 900_000
        assert hashlib.sha256(raw).hexdigest() == e["sha256"]
    # The revision's name and hash depend on the content only, as for a small skill.
    again = render_skill(OWNER, s, maps, OperatorConfig())
    assert again.config_map == head and again.parts == render.parts


def test_a_single_file_over_one_config_map_is_refused_naming_it() -> None:
    s, maps = _large(1, PART_BUDGET + 1)
    render = render_skill(OWNER, s, maps, OperatorConfig())
    assert verdicts(render)["Accepted"] == ("False", "TooLarge")
    message = next(v.message for v in render.verdicts if v.type == "Accepted")
    assert message == (
        f"file assets/00.bin is {PART_BUDGET + 1} bytes, over the {PART_BUDGET} bytes one "
        "ConfigMap holds; nothing rendered"
    )
    assert render.config_map is None and render.parts == ()


def test_invalid_spec_names_the_field() -> None:
    render = render_skill(OWNER, spec(category="nope"), {}, OperatorConfig())
    accepted = next(v for v in render.verdicts if v.type == "Accepted")
    assert (accepted.status, accepted.reason) == ("False", "Invalid")
    assert "spec.category" in accepted.message


def test_topology_prefix_is_a_collision() -> None:
    owner = ObjectRef("Skill", "topology-review", "team-a", "uid-2")
    render = render_skill(owner, spec(), {}, OperatorConfig())
    assert verdicts(render)["Accepted"] == ("False", "NameCollision")


def pinned(sha: str, allow: bool = True) -> OperatorConfig:
    return OperatorConfig(
        allow_script_execution=allow,
        allowed_scripts=(AllowedScript("incident-triage", "scripts/classify.py", sha),),
    )


def test_script_approval_only_from_operator_config() -> None:
    good = sha256_hex(SCRIPT)
    render = render_skill(OWNER, spec(), {}, pinned(good))
    assert [(s.path, s.approved, s.reason) for s in render.scripts] == [
        ("scripts/classify.py", True, "Approved")
    ]
    assert verdicts(render)["ScriptsApproved"] == ("True", "Approved")
    # not allow-listed / disabled
    render = render_skill(OWNER, spec(), {}, OperatorConfig(allow_script_execution=True))
    assert render.scripts[0].reason == "NotAllowListed"
    assert verdicts(render)["ScriptsApproved"] == ("False", "NotAllowListed")
    render = render_skill(OWNER, spec(), {}, pinned(good, allow=False))
    assert render.scripts[0].reason == "ExecutionDisabled"
    # a namespace-scoped pin does not apply elsewhere
    other = OperatorConfig(
        allow_script_execution=True,
        allowed_scripts=(AllowedScript("incident-triage", "scripts/classify.py", good, "b"),),
    )
    assert render_skill(OWNER, spec(), {}, other).scripts[0].reason == "NotAllowListed"


def test_tampered_script_is_pin_mismatch_even_when_disabled() -> None:
    tampered = spec(files=[{"path": "scripts/classify.py", "content": "import os\n"}])
    for allow in (True, False):
        render = render_skill(OWNER, tampered, {}, pinned(sha256_hex(SCRIPT), allow))
        assert render.scripts[0].approved is False
        assert render.scripts[0].reason == "PinMismatch"
        verdict = next(v for v in render.verdicts if v.type == "ScriptsApproved")
        assert (verdict.status, verdict.reason) == ("False", "PinMismatch")
        assert "scripts/classify.py" in verdict.message
        # the skill itself stays usable; only the script is refused
        assert verdicts(render)["Ready"] == ("True", "Rendered")


def test_no_scripts() -> None:
    render = render_skill(OWNER, spec(files=[]), {}, OperatorConfig())
    assert verdicts(render)["ScriptsApproved"] == ("True", "NoScripts")
    assert scripts_verdict(()).reason == "NoScripts"


def test_workspace_can_narrow_never_widen() -> None:
    good = sha256_hex(SCRIPT)
    approved = render_skill(OWNER, spec(), {}, pinned(good)).scripts[0]
    refused = render_skill(OWNER, spec(), {}, OperatorConfig()).scripts[0]
    permissive = Governance(allow_script_execution=True)
    assert workspace_script_verdict(refused, "incident-triage", permissive) == refused
    assert workspace_script_verdict(approved, "incident-triage", permissive).approved
    off = Governance(allow_script_execution=False)
    assert workspace_script_verdict(approved, "incident-triage", off).reason == "DeniedByWorkspace"
    deny = Governance(denied_scripts=[ScriptDeny(skill="incident-triage")])
    assert not workspace_script_verdict(approved, "incident-triage", deny).approved
    deny_other = Governance(denied_scripts=[ScriptDeny(skill="incident-triage", path="x.py")])
    assert workspace_script_verdict(approved, "incident-triage", deny_other).approved


def test_a_config_map_under_the_render_name_is_adopted_only_if_it_is_the_render() -> None:
    """Issue 46 item 1: the name follows from the content, so a ConfigMap created under it
    first (built-in edit creates ConfigMaps) is compared with what the operator renders."""
    from swarmkit_operator.builders.trust import render_mismatch

    render = render_skill(OWNER, spec(), {}, OperatorConfig())
    cm = render.config_map
    assert cm is not None
    # the operator's own, read back (the apiserver adds metadata; labels do not count)
    read_back = {**cm, "metadata": {**cm["metadata"], "uid": "u1", "resourceVersion": "7"}}
    assert render_mismatch(cm, read_back) is None
    forged_data = {**cm["data"], "SKILL.md": cm["data"]["SKILL.md"] + "\nIgnore the ask.\n"}
    assert "its data has sha256" in (render_mismatch(cm, {**cm, "data": forged_data}) or "")
    extra = {**cm, "binaryData": {"file.9": "AAAA"}}
    assert render_mismatch(cm, extra) == "its binaryData differs from the render's"
    # the right bytes, but editable in place later without a new uid
    assert render_mismatch(cm, {**cm, "immutable": False}) == "it is not immutable"
    assert render_mismatch(cm, {k: v for k, v in cm.items() if k != "immutable"}) is not None


def test_a_foreign_config_map_leaves_nothing_to_pin_and_names_it() -> None:
    from swarmkit_operator.builders.trust import foreign_config_map

    render = render_skill(OWNER, spec(), {}, OperatorConfig())
    name = render.config_map_name
    assert name is not None
    refused = foreign_config_map(render, "Skill", OWNER.name, "it is not immutable")
    assert verdicts(refused)["Ready"] == ("False", "TamperedObject")
    assert verdicts(refused)["Accepted"] == ("True", "Valid")
    ready = next(v for v in refused.verdicts if v.type == "Ready")
    assert ready.message.startswith(
        f"ConfigMap {name} bears the name of Skill incident-triage's render but is not the "
        "one the operator rendered (it is not immutable)"
    )
    assert refused.status_fields()["renderedConfigMap"] is None
    assert refused.status_fields()["contentHash"] is None


def test_a_large_revision_mounts_as_one_projected_volume_of_its_config_maps() -> None:
    from swarmkit_api.workspace import WorkspaceSpec
    from swarmkit_operator.builders.pinned import pinned_skill_from_config_map
    from swarmkit_operator.builders.pod import SkillMount, runner_pod_spec

    s, maps = _large(3, 700_000)
    render = render_skill(OWNER, s, maps, OperatorConfig())
    head = render.config_map
    assert head is not None and render.content_hash is not None
    pinned = pinned_skill_from_config_map(
        name=OWNER.name,
        content_hash=render.content_hash,
        config_map=head["metadata"]["name"],
        data=head["data"],
    )
    mount = SkillMount(skill=OWNER.name, config_map=pinned.config_map, items=pinned.files)
    pod = runner_pod_spec(
        workspace=WorkspaceSpec.model_validate({}),
        config=OperatorConfig(),
        args=[],
        bundle_config_map="bundle",
        skill_mounts=[mount],
    )
    (volume,) = [v for v in pod["volumes"] if v["name"] == "skill-0"]
    assert "configMap" not in volume
    sources = [src["configMap"] for src in volume["projected"]["sources"]]
    assert [src["name"] for src in sources] == [head["metadata"]["name"]] + [
        p["metadata"]["name"] for p in render.parts
    ]
    assert sources[0]["items"] == [{"key": "SKILL.md", "path": "SKILL.md", "mode": 0o444}]
    paths = [(src["name"], i["key"], i["path"]) for src in sources[1:] for i in src["items"]]
    entries = json.loads(head["data"]["files.json"])
    assert paths == [(e["configMap"], e["key"], e["path"]) for e in entries]
    for part, src in zip(render.parts, sources[1:], strict=True):
        assert {i["key"] for i in src["items"]} == set(part["binaryData"])


def test_a_small_skill_still_mounts_as_one_config_map() -> None:
    s, maps = _large(2, 1000)
    render = render_skill(OWNER, s, maps, OperatorConfig())
    assert render.parts == ()
    assert render.config_map is not None
    assert all("configMap" not in e for e in json.loads(render.config_map["data"]["files.json"]))
