"""Conformance of the served Agent Card with both A2A versions it advertises, and of a refusal.

* **A2A 1.0**: the normative definition is ``specification/a2a.proto`` (the JSON schema is a
  non-normative artifact generated from it). The published ``a2a-sdk`` package carries that
  proto compiled (``a2a.types.a2a_pb2``) with its ``google.api.field_behavior`` annotations:
  the card is read as 1.0 readers read it (protobuf JSON, unknown members ignored, like the
  SDK's own ``parse_agent_card``) and every ``REQUIRED`` field is checked, in every nested
  message.
* **A2A 0.3**: :data:`A2A_V03_CARD` records, as a JSON Schema written here, what the official
  v0.3.0 schema (``specification/json/a2a.json`` at tag v0.3.0) requires of an AgentCard and of
  what it holds: required members, member types, and the ``SecurityScheme`` union, each
  alternative of which requires its ``type`` discriminator. The card is also read with the
  0.3 models the ``a2a-sdk`` package ships (``a2a.compat.v0_3.types``, generated from that
  schema).
* **401**: the status, the RFC 6750 challenge and a body that is not a JSON-RPC error (see
  :func:`swarmkit_runner.serve.app.unauthorized`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from a2a.compat.v0_3 import types as v03
from a2a.types import a2a_pb2
from google.api import field_behavior_pb2
from google.protobuf import json_format
from google.protobuf.message import Message

from tests.support.bundles import agent, bundle, replay_provider, topology_of, write_bundle
from tests.support.served import ServedRunner

TOKEN = "card-token-5e61"


def _obj(required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


_STR = {"type": "string"}
_STRS = {"type": "array", "items": _STR}
_BOOL = {"type": "boolean"}
_SCOPES = {"type": "object", "additionalProperties": _STRS}  # scheme name → scopes


def _scheme(kind: str, required: list[str], **properties: Any) -> dict[str, Any]:
    return _obj(["type", *required], {"type": {"const": kind}, **properties})


#: What the A2A v0.3.0 JSON schema requires of an AgentCard (recorded here, see the module doc).
A2A_V03_CARD: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "definitions": {
        "SecurityScheme": {
            "anyOf": [
                _scheme(
                    "apiKey", ["in", "name"], **{"in": {"enum": ["cookie", "header", "query"]}}
                ),
                _scheme("http", ["scheme"], scheme=_STR, bearerFormat=_STR, description=_STR),
                _scheme("oauth2", ["flows"], flows={"type": "object"}),
                _scheme("openIdConnect", ["openIdConnectUrl"], openIdConnectUrl=_STR),
                _scheme("mutualTLS", []),
            ]
        },
        "AgentSkill": _obj(
            ["description", "id", "name", "tags"],
            {
                "id": _STR,
                "name": _STR,
                "description": _STR,
                "tags": _STRS,
                "examples": _STRS,
                "inputModes": _STRS,
                "outputModes": _STRS,
                "security": {"type": "array", "items": _SCOPES},
            },
        ),
    },
    **_obj(
        [
            "capabilities",
            "defaultInputModes",
            "defaultOutputModes",
            "description",
            "name",
            "protocolVersion",
            "skills",
            "url",
            "version",
        ],
        {
            "name": _STR,
            "description": _STR,
            "url": _STR,
            "version": _STR,
            "protocolVersion": _STR,
            "preferredTransport": _STR,
            "additionalInterfaces": {
                "type": "array",
                "items": _obj(["transport", "url"], {"transport": _STR, "url": _STR}),
            },
            "capabilities": _obj(
                [],
                {
                    "streaming": _BOOL,
                    "pushNotifications": _BOOL,
                    "stateTransitionHistory": _BOOL,
                    "extensions": {"type": "array"},
                },
            ),
            "defaultInputModes": _STRS,
            "defaultOutputModes": _STRS,
            "skills": {"type": "array", "items": {"$ref": "#/definitions/AgentSkill"}},
            "securitySchemes": {
                "type": "object",
                "additionalProperties": {"$ref": "#/definitions/SecurityScheme"},
            },
            "security": {"type": "array", "items": _SCOPES},
            "supportsAuthenticatedExtendedCard": _BOOL,
        },
    ),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedRunner]:
    root = agent("answerer", provider="replay", replay=[{"text": "42"}])
    b = bundle(
        agents=[root],
        providers=[replay_provider()],
        topology=topology_of("oracle", root.name, description="Answers questions about 42."),
    )
    layout = write_bundle(b, Path(tmp_path_factory.mktemp("served")))
    with ServedRunner(layout, tokens=[TOKEN]) as runner:
        yield runner


@pytest.fixture
def card(served: ServedRunner) -> dict[str, Any]:
    response = httpx.get(served.card_url)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    data: dict[str, Any] = response.json()
    return data


def v03_problems(card: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(A2A_V03_CARD)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(card)]


def missing_required(message: Message, path: str = "AgentCard") -> list[str]:
    """Every ``REQUIRED`` (google.api.field_behavior) field of ``message`` left unset, deep."""
    missing: list[str] = []
    for field in message.DESCRIPTOR.fields:
        behaviors = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
        value = getattr(message, field.name)
        where = f"{path}.{field.json_name}"
        if field.is_repeated:
            present = len(value) > 0
        elif field.message_type is not None or field.has_presence:
            present = message.HasField(field.name)
        else:
            present = value != field.default_value
        if field_behavior_pb2.REQUIRED in behaviors and not present:
            missing.append(where)
        if field.message_type is None or not present:
            continue
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].message_type is not None:
                for key, item in value.items():
                    missing += missing_required(item, f"{where}[{key}]")
        elif field.is_repeated:
            for i, item in enumerate(value):
                missing += missing_required(item, f"{where}[{i}]")
        else:
            missing += missing_required(value, where)
    return missing


def test_the_card_is_an_a2a_1_0_agent_card(card: dict[str, Any], served: ServedRunner) -> None:
    parsed = json_format.ParseDict(card, a2a_pb2.AgentCard(), ignore_unknown_fields=True)
    assert missing_required(parsed) == []
    endpoint = f"{served.base_url}/a2a"
    first = parsed.supported_interfaces[0]
    assert (first.url, first.protocol_binding, first.protocol_version) == (
        endpoint,
        "JSONRPC",
        "1.0",
    )
    # A 1.0 reader sees the bearer scheme and the requirement that every call uses it.
    scheme = parsed.security_schemes["bearer"]
    assert scheme.WhichOneof("scheme") == "http_auth_security_scheme"
    assert scheme.http_auth_security_scheme.scheme.lower() == "bearer"
    [requirement] = parsed.security_requirements
    assert set(requirement.schemes) == {"bearer"}
    assert list(requirement.schemes["bearer"].list) == []
    # The 0.3 members are ones 1.0 does not define (ignored by its readers), not 1.0 fields
    # with another meaning.
    v1_fields = {f.json_name for f in a2a_pb2.AgentCard.DESCRIPTOR.fields}
    assert set(card) - v1_fields == {
        "url",
        "preferredTransport",
        "additionalInterfaces",
        "protocolVersion",
        "security",
    }


def test_the_card_is_an_a2a_0_3_agent_card(card: dict[str, Any], served: ServedRunner) -> None:
    assert v03_problems(card) == []
    parsed = v03.AgentCard.model_validate(card)
    assert parsed.url == f"{served.base_url}/a2a" and parsed.protocol_version == "0.3.0"
    assert parsed.preferred_transport == "JSONRPC"
    scheme = parsed.security_schemes["bearer"].root  # type: ignore[index]
    assert isinstance(scheme, v03.HTTPAuthSecurityScheme)
    assert (scheme.type, scheme.scheme.lower()) == ("http", "bearer")
    assert parsed.security == [{"bearer": []}]


def test_the_0_3_check_refuses_a_scheme_without_its_type(card: dict[str, Any]) -> None:
    """The card as served before: the 1.0 shape only, which the a2a-go SDK refused."""
    old = copy.deepcopy(card)
    old["securitySchemes"] = {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
    [problem] = v03_problems(old)
    assert problem.startswith("['securitySchemes', 'bearer']: ")
    assert problem.endswith("is not valid under any of the given schemas")
    no_url = {k: v for k, v in card.items() if k != "url"}
    assert v03_problems(no_url) == ["[]: 'url' is a required property"]
    parsed = json_format.ParseDict(
        {k: v for k, v in card.items() if k != "skills"},
        a2a_pb2.AgentCard(),
        ignore_unknown_fields=True,
    )
    assert missing_required(parsed) == ["AgentCard.skills"]


def test_a_refusal_is_401_with_a_bearer_challenge_and_no_json_rpc_error(
    served: ServedRunner,
) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}
    none = httpx.post(f"{served.base_url}/a2a", json=call)
    wrong = httpx.post(
        f"{served.base_url}/a2a", json=call, headers={"Authorization": "Bearer nope"}
    )
    assert none.status_code == wrong.status_code == 401
    assert none.headers["www-authenticate"] == 'Bearer realm="swarmkit"'
    assert wrong.headers["www-authenticate"] == 'Bearer realm="swarmkit", error="invalid_token"'
    for response in (none, wrong):
        assert response.headers["content-type"] == "application/problem+json"
        body = response.json()
        assert body["status"] == 401 and body["title"] == "Unauthorized"
        # No "jsonrpc"/"error": the SDKs then report the HTTP status, not a JSON-RPC code.
        assert "jsonrpc" not in body and "error" not in body
    assert not served.events("run.start")
