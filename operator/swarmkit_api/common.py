"""Pieces shared by several resources: references, conditions, resources, JSON Schemas."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from .base import ApiModel, CelRule
from .metaschema import schema_problem

KEBAB = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
KEBAB_RE = re.compile(KEBAB)
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"

#: Kubernetes label syntax, as the apiserver checks it: a value (and a key's name part) is at
#: most 63 characters of ``[A-Za-z0-9_.-]`` starting and ending alphanumeric; a key's optional
#: prefix is a DNS subdomain of at most 253 characters. Written once as RE2-compatible regular
#: expressions so the CEL rule and its Python twin are the same check.
MAX_LABEL = 63
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
#: A key whose prefix is longer than 253 characters (a key without '/' that long already
#: fails LABEL_KEY).
LABEL_PREFIX_TOO_LONG = r"^[^/]{254}"
_LABEL_VALUE = re.compile(LABEL_VALUE)
_LABEL_KEY = re.compile(LABEL_KEY)
_LABEL_PREFIX_TOO_LONG = re.compile(LABEL_PREFIX_TOO_LONG)
#: Label prefixes users may not set through Run.spec.labels (they would spoof our links).
RESERVED_LABEL_DOMAINS = ("swarmkit.dev", "kubernetes.io", "k8s.io")
#: The same as a regular expression on a key (the domain or a subdomain of it, then '/').
RESERVED_LABEL_KEY = r"^([^/]*\.)?(swarmkit\.dev|kubernetes\.io|k8s\.io)/"
#: Most labels a Run or a selector may carry (bounds the CEL cost of checking each one).
MAX_LABELS = 64
#: A label value, bounded so the apiserver can afford the CEL check of every one.
LabelValue = Annotated[str, Field(max_length=MAX_LABEL)]


def cel_string(regex: str) -> str:
    """``regex`` as a single-quoted CEL string literal."""
    return "'" + regex.replace("\\", "\\\\") + "'"


def is_label_value(text: str) -> bool:
    """Whether ``text`` is a valid label value."""
    return bool(_LABEL_VALUE.fullmatch(text))


def is_valid_label(key: str, value: str) -> bool:
    """Whether ``key: value`` is a syntactically valid Kubernetes label."""
    return (
        bool(_LABEL_KEY.fullmatch(key))
        and not _LABEL_PREFIX_TOO_LONG.match(key)
        and is_label_value(value)
    )


def labels_rule(field: str, what: str) -> CelRule:
    """The admission check of a map of labels ``field`` (camelCase), with its Python twin."""
    attr = re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), field)
    return CelRule(
        rule=f"!has(self.{field}) || self.{field}.all(k, k.matches({cel_string(LABEL_KEY)}) "
        f"&& !k.matches({cel_string(LABEL_PREFIX_TOO_LONG)}) "
        f"&& self.{field}[k].matches({cel_string(LABEL_VALUE)}))",
        message=f"{what}: every key must be a label key ([prefix/]name, the name at most 63 "
        "characters of [A-Za-z0-9_.-] starting and ending alphanumeric, the prefix a DNS "
        "subdomain) and every value a label value (at most 63 such characters, or empty)",
        field_path=f".{field}",
        check=lambda m: all(is_valid_label(k, v) for k, v in getattr(m, attr).items()),
    )


ConditionStatus = Literal["True", "False", "Unknown"]
PermissionTier = Literal["open", "cautious", "strict", "readonly"]
Effects = Literal["read", "write", "unknown"]


class LocalObjectReference(ApiModel):
    """A reference to another object in the same namespace."""

    name: str = Field(min_length=1, max_length=253, description="Name of the referenced object.")


class SecretKeyRef(ApiModel):
    """A key of a Secret in the same namespace. The value is never copied by the operator."""

    name: str = Field(min_length=1, max_length=253, description="Name of the Secret.")
    key: str = Field(min_length=1, max_length=253, description="Key within the Secret's data.")


class ConfigMapKeyRef(ApiModel):
    """A key of a ConfigMap in the same namespace."""

    name: str = Field(min_length=1, max_length=253, description="Name of the ConfigMap.")
    key: str = Field(min_length=1, max_length=253, description="Key within the ConfigMap's data.")


class EnvVar(ApiModel):
    """An environment variable: a literal value or a Secret key reference (never both)."""

    cel_rules = (
        CelRule(
            rule="has(self.value) != has(self.secretKeyRef)",
            message="exactly one of value or secretKeyRef must be set",
            check=lambda m: (m.value is None) != (m.secret_key_ref is None),
        ),
    )

    name: str = Field(pattern=ENV_NAME, max_length=128, description="Variable name.")
    value: str | None = Field(
        default=None,
        description="Literal, non-secret value. Use secretKeyRef for anything sensitive.",
    )
    secret_key_ref: SecretKeyRef | None = Field(
        default=None, description="Secret key whose value is injected at run time."
    )


class HeaderFromSecret(ApiModel):
    """An HTTP header whose value comes from a Secret key (optionally with a prefix)."""

    name: str = Field(min_length=1, max_length=128, description="Header name, e.g. Authorization.")
    secret_key_ref: SecretKeyRef = Field(description="Secret key holding the header value.")
    prefix: str = Field(default="", description="Text placed before the secret, e.g. 'Bearer '.")


class ResourceRequirements(ApiModel):
    """Compute resources for a container, as in the core Kubernetes API."""

    requests: dict[str, str] = Field(
        default_factory=dict, description="Minimum resources, e.g. {cpu: 100m, memory: 128Mi}."
    )
    limits: dict[str, str] = Field(
        default_factory=dict, description="Maximum resources, e.g. {cpu: '1', memory: 512Mi}."
    )


#: Deepest nesting of an embedded JSON Schema or free JSON value (objects and lists): well
#: inside what every builder serializes (pydantic stops near 128 levels). The apiserver
#: cannot count levels (CEL has no recursion), so the operator refuses deeper ones with a
#: condition naming the field.
MAX_JSON_DEPTH = 64


def json_depth(value: Any) -> int:
    """Levels of objects and lists in ``value`` (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
        if children is None:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > MAX_JSON_DEPTH:
            return deepest  # enough to refuse; a hostile value may be very deep
        stack.extend((c, depth + 1) for c in children)
    return deepest


def bounded_depth(value: Any) -> Any:
    """``value`` when it nests at most :data:`MAX_JSON_DEPTH` levels (pydantic validator)."""
    if json_depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"nests deeper than {MAX_JSON_DEPTH} levels")
    return value


#: A free JSON object whose depth is bounded.
BoundedJson = Annotated[dict[str, Any], AfterValidator(bounded_depth)]

#: The JSON Schema types (``{type: banana}`` is refused at admission, naming the field).
JsonSchemaType = Literal["object", "array", "string", "number", "integer", "boolean", "null"]


#: The pydantic error type of a JSON Schema that breaks the metaschema (its field errors
#: become ``Accepted=False InvalidSchema``).
INVALID_SCHEMA_ERROR = "invalid_schema"


class JsonSchema(ApiModel):
    """A JSON Schema object. Only the top-level keywords the operator inspects are typed;
    any other JSON Schema keyword is kept as written. The whole document, every nested
    subschema included, must satisfy the 2020-12 metaschema (:mod:`.metaschema`)."""

    model_config = ApiModel.model_config | {
        "extra": "allow",
        "json_schema_extra": {"x-kubernetes-preserve-unknown-fields": True},
    }

    type: JsonSchemaType | None = Field(
        default=None,
        description="JSON Schema type, usually 'object' (one of the seven JSON Schema types).",
    )
    properties: dict[str, dict[str, Any]] | None = Field(
        default=None, description="Property name to its JSON Schema."
    )
    required: list[str] | None = Field(default=None, description="Required property names.")

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        bounded_depth(data)  # first: the metaschema walk is sized by the value
        problem = schema_problem(data)
        if problem is not None:
            where, what = problem
            raise PydanticCustomError(
                INVALID_SCHEMA_ERROR,
                "not a valid JSON Schema: {what}",
                {"field_path": where, "what": what},
            )
        return data

    def as_dict(self) -> dict[str, Any]:
        """The schema as a plain JSON Schema document."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Condition(ApiModel):
    """A status condition following the Kubernetes API conventions."""

    type: str = Field(description="Type of the condition, e.g. Ready or Succeeded.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(description="One-word CamelCase reason for the last transition.")
    message: str = Field(default="", description="Human-readable detail of the last transition.")
    last_transition_time: datetime = Field(
        description="When the status last changed (not updated when only the message changes)."
    )
    observed_generation: int = Field(
        default=0, description="The .metadata.generation the condition was computed from."
    )


#: A status's conditions: a list keyed by ``type`` (``x-kubernetes-list-type: map``), so
#: each controller server-side applies its own condition types of one object.
Conditions = Annotated[
    list[Condition],
    Field(
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        }
    ),
]


class ObjectMeta(ApiModel):
    """The subset of Kubernetes object metadata the models look at; the rest is kept."""

    model_config = ApiModel.model_config | {"extra": "allow"}

    name: str | None = Field(default=None, description="Object name.")
    namespace: str | None = Field(default=None, description="Object namespace.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations.")
