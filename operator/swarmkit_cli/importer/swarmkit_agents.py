"""SwarmKit archetypes and topologies (upstream ``archetype.schema.json`` and
``topology.schema.json``) → Agents and Topologies.

An archetype is an Agent: ``defaults.prompt.system`` → ``systemPrompt``, ``defaults.model``
→ ``model``, ``defaults.skills`` → grants (an ``{abstract: {category, capability}}`` entry is
bound as SwarmKit binds it: the one imported skill of that category whose id contains the
capability), ``defaults.iam.base_scope`` → ``scopes``. A topology's ``agents.root`` tree
(``children`` lists) becomes the Topology's nodes; a node that overrides its archetype
(model, prompt, skills, ``skills_additional``, iam, output_schema) gets its own Agent
``<topology>-<node>``, merged as SwarmKit merges it: model, prompt and iam shallowly (the
node's keys win), ``skills`` replacing the archetype's, ``skills_additional`` appended.
Merging and binding wait for assembly (:func:`finalize`), when every skill and archetype
has been read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from swarmkit_api.common import KEBAB_RE
from swarmkit_api.names import dns_label

from .collected import (
    DISPLAY_NAME_ANNOTATION,
    Collected,
    Piece,
    annotation_key,
    source_annotation,
)
from .common_map import model_selection
from .mapping import Fields, Src
from .safefs import Refused, read_inside
from .yamlsrc import YamlError, load_docs

#: node fields that make a node its own Agent
OVERRIDES = ("model", "prompt", "skills", "skills_additional", "iam", "output_schema")
NODE_FIELDS = (
    "id, role, archetype, model, prompt, skills, skills_additional, iam, output_schema, "
    "children, requires, depends_on, intent_monitoring, funnel"
)


def _parts(col: Collected, f: Fields, *, abstract_ok: bool) -> dict[str, Any]:
    """The mergeable parts of an archetype's ``defaults`` or a topology node."""
    parts: dict[str, Any] = {}
    model = model_selection(col, f)
    if model is not None:
        parts["model"] = model
    if "prompt" in f:
        if isinstance(f.data.get("prompt"), dict):
            pf = f.sub("prompt")
            if "system" in pf:
                parts["system"] = pf.take("system")
            pf.unsupported("persona", "SwarmKit's runtime does not send it either")
            pf.finish("system, persona")
        else:
            f.error("prompt", "expected a mapping {system: ...} (upstream prompt object)")
            f.take("prompt")
    for key in ("skills", "skills_additional"):
        if key not in f:
            continue
        entries = f.take(key)
        if not isinstance(entries, list):
            f.error(key, "expected a list of skill ids")
            continue
        ok = []
        for i, entry in enumerate(entries):
            if isinstance(entry, str) or (abstract_ok and isinstance(entry, dict)):
                ok.append(entry)
            else:
                f.sub(key).error(i, "expected a skill id")
        parts[key] = ok
    if "iam" in f:
        iam = f.sub("iam")
        if "base_scope" in iam:
            parts["scopes"] = list(iam.take("base_scope") or [])
        iam.unsupported("elevated_scopes", "an Agent holds its scopes; there is no elevation step")
        iam.finish("base_scope, elevated_scopes")
    if "output_schema" in f:
        parts["output_schema"] = _output_schema(f)
    return parts


def _output_schema(f: Fields) -> dict[str, Any] | None:
    value = f.take("output_schema")
    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            path, text = read_inside(Path(f.src.file).parent, value)
            if path.suffix == ".json":
                loaded = json.loads(text)
            else:
                docs = load_docs(text, str(path))
                loaded = docs[0].value if docs else None
        except Refused as exc:
            f.error("output_schema", f"the schema file {value!r} is not read: {exc}")
            return None
        except YamlError as exc:
            f.error("output_schema", f"cannot read the schema file {value!r}: {exc.message}")
            return None
        except ValueError as exc:
            f.error("output_schema", f"cannot read the schema file {value!r}: {exc}")
            return None
        if isinstance(loaded, dict):
            return loaded
    f.error("output_schema", "expected a JSON Schema object, a schema file path or null")
    return None


def _name(f: Fields, key: str, what: str) -> str | None:
    value = f.take(key)
    if not isinstance(value, str) or not KEBAB_RE.match(value) or len(value) > 63:
        f.error(key, f"{value!r}: {what} must be lowercase-kebab, at most 63 characters")
        return None
    return value


def read_archetype(col: Collected, src: Src) -> None:
    f = Fields(col.report, src)
    f.take("apiVersion")
    f.take("kind")
    meta = f.sub("metadata")
    name = _name(meta, "id", "metadata.id (it becomes metadata.name)")
    display, description = meta.take("name"), meta.take("description")
    meta.finish("id, name, description")
    annotations = source_annotation(src)
    if isinstance(display, str) and display:
        annotations[DISPLAY_NAME_ANNOTATION] = display
    role = f.take("role")
    if isinstance(role, str):
        annotations["swarmkit.dev/role"] = role
    parts: dict[str, Any] = {}
    if "defaults" in f:
        defaults = f.sub("defaults")
        parts = _parts(col, defaults, abstract_ok=True)
        defaults.finish("model, prompt, skills, iam, output_schema")
    if "executor" in f:
        ex = f.sub("executor")
        kind = ex.take("kind")
        if kind not in (None, "model"):
            f.warn(
                "executor",
                f"executor kind {kind!r}: agents run in the runner's model "
                "loop; harness executors are not supported",
            )
        ex.take_all()
    if "provenance" in f:
        prov = f.sub("provenance")
        for key, value in prov.take_all().items():
            ann = annotation_key("swarmkit.dev", f"provenance-{str(key).replace('_', '-')}")
            if ann is None:
                prov.warn(key, "not a valid annotation name; not imported")
            else:
                annotations[ann] = str(value)
    f.finish("metadata, role, defaults, executor, provenance")
    if name is None:
        return
    body: dict[str, Any] = {}
    if isinstance(description, str) and description.strip():
        body["description"] = description.strip()
    col.agents.append(
        Piece(name, body, src, annotations, extra={"archetype": True, "parts": parts})
    )


def read_topology(col: Collected, src: Src) -> None:
    f = Fields(col.report, src)
    f.take("apiVersion")
    f.take("kind")
    meta = f.sub("metadata")
    name = _name(meta, "name", "metadata.name")
    version, description = meta.take("version"), meta.take("description")
    meta.finish("name, version, description")
    annotations = source_annotation(src)
    if version is not None:
        annotations["swarmkit.dev/source-version"] = str(version)
    spec: dict[str, Any] = {"workspaceRef": {"name": col.workspace}, "agents": []}
    if isinstance(description, str) and description.strip():
        spec["description"] = description.strip()
    f.unsupported(
        "runtime",
        "a Run's timeout and a served topology's concurrency are set on the Run and in serve",
    )
    f.unsupported("artifacts", "knowledge bases and review queues are not resources here")
    f.unsupported("intent_monitoring", "there is no drift monitor")
    f.unsupported("governance", "decision skills are granted to agents, not bound to triggers")
    agents = f.sub("agents")
    root = agents.data.get("root")
    agents.take("root")
    agents.finish("root")
    f.finish("metadata, agents")
    if name is None:
        return
    if not isinstance(root, dict):
        f.error("agents", "expected agents.root: the root agent {id, role, ...}")
        return
    _node(col, name, agents.src.at("root"), None, spec["agents"])
    col.topologies.append(Piece(name, spec, src, annotations))


def _node(
    col: Collected, topology: str, src: Src, parent: str | None, out: list[dict[str, Any]]
) -> None:
    nf = Fields(col.report, src)
    node_id = _name(nf, "id", "a node id")
    role = nf.take("role")
    archetype = nf.take("archetype")
    children = nf.take("children")
    own = any(k in nf for k in OVERRIDES)
    parts = _parts(col, nf, abstract_ok=False)
    for key, why in (
        ("requires", "skill ordering rules are not enforced; say it in the system prompt"),
        ("depends_on", "siblings are delegated to by their parent, in the order it chooses"),
        ("intent_monitoring", "there is no drift monitor"),
        ("funnel", "gate the output with a decision skill or a human Review instead"),
    ):
        nf.unsupported(key, why)
    nf.finish(NODE_FIELDS)
    if node_id is None:
        return
    agent = str(archetype) if isinstance(archetype, str) else None
    if own or agent is None:
        # SwarmKit merges the node over its archetype; this node gets that merge as its own
        # Agent (built at assembly, when the archetype has been read).
        own_name = dns_label(f"{topology}-{node_id}")  # hashed, never cut: nodes stay apart
        extra = {"archetype": False, "base": agent, "parts": parts, "node": node_id}
        col.agents.append(Piece(own_name, {}, nf.src, source_annotation(nf.src), extra))
        agent = own_name
    node: dict[str, Any] = {"name": node_id, "agentRef": {"name": agent}, "role": role}
    if parent is not None:
        node["parent"] = parent
    out.append(node)
    if isinstance(children, list):
        for i, _ in enumerate(children):
            _node(col, topology, src.at("children", i), node_id, out)
    elif children is not None:
        nf.error("children", "expected a list of child agents (upstream topology schema)")


def finalize(col: Collected) -> None:
    """Build every archetype's and node's Agent spec (merge, then bind abstract skills)."""
    archetypes = {
        p.name: (dict(p.extra["parts"]), dict(p.body))
        for p in col.agents
        if p.extra.get("archetype") is True and "parts" in p.extra
    }
    used = {n["agentRef"]["name"] for t in col.topologies for n in t.body.get("agents", [])}
    for p in col.agents:
        if "parts" not in p.extra:
            continue
        parts = dict(p.extra["parts"])
        additional: list[Any] = parts.pop("skills_additional", [])
        if p.extra["archetype"] is False:
            base_name = p.extra["base"]
            if base_name is not None:
                base = archetypes.get(base_name)
                if base is None:
                    col.report.error(
                        p.src.file,
                        p.src.line,
                        p.src.field("archetype"),
                        f"node {p.extra['node']!r}: archetype {base_name!r} is not among the "
                        "imported archetypes",
                    )
                    continue
                parts = _merge(base[0], parts)
                p.body = {**base[1], **p.body}
        skills = list(parts.get("skills") or []) + [s for s in additional]
        spec: dict[str, Any] = {"workspaceRef": {"name": col.workspace}, **p.body}
        if "model" in parts:
            spec["model"] = parts["model"]
        if parts.get("system"):
            spec["systemPrompt"] = parts["system"]
        if parts.get("scopes"):
            spec["scopes"] = parts["scopes"]
        if parts.get("output_schema") is not None:
            spec["outputSchema"] = parts["output_schema"]
        grants = _bind(col, p, skills, strict=p.extra["archetype"] is False or p.name in used)
        if grants:
            spec["skills"] = grants
        p.body = spec
        del p.extra["parts"]


def _merge(base: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    out.pop("skills_additional", None)
    for key, value in node.items():
        if key == "model" and isinstance(base.get("model"), dict):
            out["model"] = {**base["model"], **value}
        elif key != "skills_additional":
            out[key] = value
    return out


def _bind(col: Collected, p: Piece, entries: list[Any], *, strict: bool) -> list[str]:
    """Concrete ids as they are; abstract placeholders bound to exactly one skill."""
    out: list[str] = []
    for entry in entries:
        if isinstance(entry, str):
            if entry not in out:
                out.append(entry)
            continue
        abstract = entry.get("abstract") if isinstance(entry, dict) else None
        category = abstract.get("category") if isinstance(abstract, dict) else None
        capability = abstract.get("capability") if isinstance(abstract, dict) else None
        matches = [
            s.name
            for s in col.skills
            if (category is None or s.body.get("category") == category)
            and (not isinstance(capability, str) or capability in s.name)
        ]
        if len(matches) == 1:
            if matches[0] not in out:
                out.append(matches[0])
            continue
        found = (
            "no imported skill matches"
            if not matches
            else (f"it matches {len(matches)} skills ({', '.join(sorted(matches))})")
        )
        message = (
            f"abstract skill {{category: {category}, capability: {capability}}}: {found}; "
            "SwarmKit binds it to exactly one skill whose category matches and whose id "
            "contains the capability"
        )
        if strict:
            col.report.error(p.src.file, p.src.line, p.src.field("skills"), message)
        else:
            col.report.warn(
                p.src.file,
                p.src.line,
                p.src.field("defaults", "skills"),
                message + "; not granted (no topology uses this archetype)",
            )
    return out
