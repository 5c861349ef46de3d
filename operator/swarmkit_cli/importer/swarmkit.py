"""SwarmKit skills (upstream ``skill.schema.json``) → Skills, and the metadata helper the
other SwarmKit readers share.

``metadata {id, name, description}`` → object name, ``displayName``, ``description``; the
rest camelCased. An ``llm_prompt`` skill's ``model`` object becomes ``provider/name``;
audit levels ``full | summary | none`` become the API's booleans. Workspaces are read by
:mod:`.swarmkit_ws`, archetypes and topologies by :mod:`.swarmkit_agents`. The "SwarmKit"
table of docs/how-to/import.md lists every rule.
"""

from __future__ import annotations

from typing import Any

from swarmkit_api.common import KEBAB_RE
from swarmkit_api.skill import SkillSpec

from .collected import DISPLAY_NAME_ANNOTATION, Collected, Piece, source_annotation
from .common_map import ensure_provider, json_schema
from .description import fit_description
from .mapping import Fields, Src, check, to_camel

SWARMKIT_API = "swarmkit/v1"
IMPLEMENTATION_FIELDS = (
    *("type", "server", "tool", "arguments", "prompt", "model", "composes", "strategy"),
    *("pack", "command", "topology", "card_url", "skill_id", "credentials_ref", "timeout_s"),
    *("on_unanswerable", "max_agent_answers", "permission", "effects"),
)
CONSTRAINT_FIELDS = ("max_latency_ms", "timeout_seconds", "on_failure", "output_retries")


def _metadata(col: Collected, fields: Fields) -> tuple[str | None, dict[str, str], str | None]:
    """``metadata {id, name, description}`` → (object name, annotations, description)."""
    meta = fields.sub("metadata")
    obj_id = meta.take("id")
    display = meta.take("name")
    description = meta.take("description")
    meta.unsupported("labels", "SwarmKit labels have no meaning here; add Kubernetes labels")
    meta.finish("id, name, description")
    annotations = source_annotation(fields.src)
    if isinstance(display, str) and display:
        annotations[DISPLAY_NAME_ANNOTATION] = display
    if obj_id is None:
        fields.error("metadata", "metadata.id is required (it becomes metadata.name)")
    elif not isinstance(obj_id, str) or not KEBAB_RE.match(obj_id) or len(obj_id) > 63:
        meta.error(
            "id",
            f"{obj_id!r} must be lowercase-kebab, at most 63 characters (it becomes metadata.name)",
        )
        obj_id = None
    return (str(obj_id) if obj_id is not None else None), annotations, description


def _audit(audit: Fields) -> dict[str, Any]:
    """Upstream's levels ``full | summary | none`` → the API's booleans (summary: logged)."""
    out: dict[str, Any] = {}
    for key in ("log_inputs", "log_outputs"):
        if key not in audit:
            continue
        level = audit.take(key)
        if level == "summary":
            audit.warn(
                key,
                "summary: the audit log records calls in full or not at all; "
                "imported as logged in full (list fields to hide under redact)",
            )
        out[to_camel(key)] = level if isinstance(level, bool) else level != "none"
    if "redact" in audit:
        out["redact"] = audit.take("redact")
    audit.finish("log_inputs, log_outputs, redact")
    return out


def _fit_description(f: Fields, spec: dict[str, Any]) -> None:
    """A description over the limit: cut, its remainder opening the instructions."""
    desc, body = spec.get("description"), spec.get("instructions", "")
    if isinstance(desc, str) and isinstance(body, str):
        key = "description" if "description" in f else "metadata"
        spec["description"], body = fit_description(f, key, desc, body)
        if body:
            spec["instructions"] = body


def read_skill(col: Collected, src: Src) -> None:
    """``kind: Skill``: metadata.id → name; metadata.name → displayName; the rest camelCased."""
    f = Fields(col.report, src)
    f.take("apiVersion")
    f.take("kind")
    name, annotations, description = _metadata(col, f)
    spec: dict[str, Any] = {}
    if isinstance(annotations.get(DISPLAY_NAME_ANNOTATION), str):
        spec["displayName"] = annotations.pop(DISPLAY_NAME_ANNOTATION)
    desc = f.take("description", description)
    if desc is not None:
        spec["description"] = desc.strip() if isinstance(desc, str) else desc
    for key in ("category",):
        if key in f:
            spec[key] = f.take(key)
    for key in ("inputs", "outputs"):
        schema = json_schema(f, key)
        if schema is not None:
            spec[key] = schema
    if "implementation" in f:
        impl = f.sub("implementation")
        out_impl = {to_camel(k): impl.take(k) for k in IMPLEMENTATION_FIELDS if k in impl}
        model = out_impl.get("model")
        if isinstance(model, dict):
            # upstream: a model object {provider, name, ...}; ours: "provider/name"
            mf = impl.sub("model")
            provider, mname = mf.take("provider"), mf.take("name")
            mf.finish("provider, name")
            out_impl["model"] = f"{provider}/{mname}" if provider else mname
            if isinstance(provider, str):
                ensure_provider(col, provider, mf.src)
        spec["implementation"] = out_impl
        impl.finish(", ".join(IMPLEMENTATION_FIELDS))
    if "constraints" in f:
        cons = f.sub("constraints")
        out: dict[str, Any] = {to_camel(k): cons.take(k) for k in CONSTRAINT_FIELDS if k in cons}
        if "retry" in cons:
            retry = cons.sub("retry")
            out["retry"] = {k: retry.take(k) for k in ("attempts", "backoff") if k in retry}
            retry.finish("attempts, backoff")
        cons.finish(", ".join((*CONSTRAINT_FIELDS, "retry")))
        spec["constraints"] = out
    if "iam" in f:
        iam = f.sub("iam")
        spec["iam"] = {"requiredScopes": iam.take("required_scopes", [])}
        iam.finish("required_scopes")
    if "provenance" in f:
        prov = f.sub("provenance")
        spec["provenance"] = {
            to_camel(k): prov.take(k) for k in ("authored_by", "version") if k in prov
        }
        for k in ("authored_date", "registry", "vendor"):
            if k in prov:
                annotations[f"swarmkit.dev/provenance-{k.replace('_', '-')}"] = str(prov.take(k))
        prov.finish("authored_by, version, authored_date, registry, vendor")
        if spec["provenance"].get("authoredBy") == "authored_by_swarm":
            prov.warn(
                "authored_by",
                "authored_by_swarm: the skill is locked until a reviewer approves its Review "
                "skill-<name>-<hash8> (kubectl swarmkit review approve)",
            )
    if "audit" in f:
        spec["audit"] = _audit(f.sub("audit"))
    if "instructions" in f:
        spec["instructions"] = f.take("instructions")
    _fit_description(f, spec)
    f.unsupported("requires", "skill prerequisites are checked by the runtime image, not the API")
    f.finish(
        "metadata, description, category, implementation, inputs, outputs, constraints, "
        "iam, provenance, audit, instructions"
    )
    if name is None:
        return
    rename = {"displayName": "metadata", "description": "metadata"}
    if check(col.report, SkillSpec, spec, src, f"Skill {name!r}", rename=rename):
        col.skills.append(Piece(name, spec, src, annotations))
