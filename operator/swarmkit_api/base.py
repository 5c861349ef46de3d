"""Base model and the one mechanism for cross-field rules shared by pydantic and CEL.

Every API type derives from :class:`ApiModel`: camelCase on the wire, unknown fields
rejected, every field documented. Cross-field rules are declared once as :class:`CelRule`
on a model; the same declaration becomes an ``x-kubernetes-validations`` entry in the
generated CRD (enforced by the apiserver at admission) and a Python check run by pydantic,
so the two validators cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler, model_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError


@dataclass(frozen=True)
class CelRule:
    """A cross-field rule: a CEL expression for the apiserver and its Python twin.

    ``check`` receives the validated model and returns True when the object is valid.
    ``field_path`` is relative to the model (``.topology``), as Kubernetes expects.
    """

    rule: str
    message: str
    check: Callable[[Any], bool]
    field_path: str = ""
    reason: str = "FieldValueInvalid"

    def to_schema(self) -> dict[str, str]:
        entry = {"rule": self.rule, "message": self.message}
        if self.field_path:
            entry["fieldPath"] = self.field_path
        if self.reason != "FieldValueInvalid":
            entry["reason"] = self.reason
        return entry


class ApiModel(BaseModel):
    """Base of every swarmkit.dev API type."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=False,
        # Validators are built on first use, not at import: a runner process validates only
        # the run bundle's models, and its start-up is mostly this package's import.
        defer_build=True,
    )

    #: Cross-field rules of this model (see :class:`CelRule`).
    cel_rules: ClassVar[tuple[CelRule, ...]] = ()

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        if cls.cel_rules:
            target["x-kubernetes-validations"] = [r.to_schema() for r in cls.cel_rules]
        return schema

    @model_validator(mode="after")
    def _check_cel_rules(self) -> Self:
        for rule in type(self).cel_rules:
            if not rule.check(self):
                raise PydanticCustomError(
                    "cel_rule",
                    rule.message,
                    {"field_path": rule.field_path, "rule": rule.rule},
                )
        return self

    def wire(self) -> dict[str, Any]:
        """The object as it appears in a manifest: camelCase, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")
