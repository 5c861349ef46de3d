"""botocore, the AWS SDK's core, as the judge of Bedrock requests (tests only).

botocore cannot live in the project's venv (it needs python-dateutil<3, kubernetes>=37 needs
>=3), so ``make venv`` installs it into its own directory (:data:`BOTOCORE_DIR`) and
:func:`judge` runs it there in a subprocess: botocore's ``SigV4Auth`` signs the request
exactly as received (same signed headers, same date, same body) and the signatures must be
equal; botocore's ``ParamValidator`` checks the body against the ``Converse`` input shape of
its ``bedrock-runtime`` service model (required members, unknown members, types), plus the
model's numeric and length bounds, which the validator leaves to the service.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

BOTOCORE_VERSION = "1.44.8"
BOTOCORE_DIR = Path.home() / ".cache" / "swarmkit-operator" / f"botocore-{BOTOCORE_VERSION}"

_JUDGE = r"""
import base64, datetime, json, sys
from unittest import mock
import botocore.auth, botocore.session
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.validate import ParamValidator

q = json.load(sys.stdin)
out = {"problems": [], "expected": None}
model = botocore.session.get_session().get_service_model("bedrock-runtime")
shape = model.operation_model("Converse").input_shape
params = {**q["body"], "modelId": q["model_id"]}
report = ParamValidator().validate(params, shape)
if report.has_errors():
    out["problems"] = [line.strip() for line in report.generate_report().splitlines()]

def ranges(value, shape, path):
    # The service model's max bounds, which ParamValidator leaves to the service.
    kind, meta = shape.type_name, shape.metadata
    if kind in ("integer", "long", "float", "double") and isinstance(value, (int, float)):
        if "max" in meta and value > meta["max"]:
            out["problems"].append(f"{path}: {value} is above the maximum {meta['max']}")
        if "min" in meta and value < meta["min"]:
            out["problems"].append(f"{path}: {value} is below the minimum {meta['min']}")
    elif kind == "string" and isinstance(value, str) and "max" in meta and len(value) > meta["max"]:
        out["problems"].append(f"{path}: longer than {meta['max']}")
    elif kind == "structure" and isinstance(value, dict) and not meta.get("document"):
        for key, sub in value.items():
            if key in shape.members:
                ranges(sub, shape.members[key], f"{path}.{key}")
    elif kind == "list" and isinstance(value, list):
        for i, sub in enumerate(value):
            ranges(sub, shape.member, f"{path}[{i}]")

ranges(params, shape, "body")
if q.get("credentials"):
    c = q["credentials"]
    when = datetime.datetime.strptime(q["amz_date"], "%Y%m%dT%H%M%SZ")
    request = AWSRequest(method="POST", url=q["url"], data=base64.b64decode(q["data"]),
                         headers=q["headers"])
    auth = botocore.auth.SigV4Auth(
        Credentials(c["AccessKeyId"], c["SecretAccessKey"], c.get("SessionToken")),
        "bedrock", q["region"])
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=when):
        auth.add_auth(request)
    out["expected"] = request.headers["Authorization"]
print(json.dumps(out))
"""


def available() -> bool:
    return (BOTOCORE_DIR / "botocore").is_dir()


def judge(
    *,
    model_id: str,
    body: dict[str, Any],
    url: str = "",
    data: bytes = b"",
    headers: dict[str, str] | None = None,
    region: str = "",
    credentials: dict[str, str] | None = None,
) -> tuple[list[str], str | None]:
    """(problems botocore finds in the body, the Authorization botocore would send)."""
    if not available():
        raise RuntimeError(f"botocore is not installed in {BOTOCORE_DIR}: run make venv")
    signed = {k.lower(): v for k, v in (headers or {}).items()}
    names = []
    auth = signed.get("authorization", "")
    if "SignedHeaders=" in auth:
        names = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    query = {
        "model_id": model_id,
        "body": body,
        "url": url,
        "data": base64.b64encode(data).decode(),
        # botocore adds X-Amz-Date and X-Amz-Security-Token itself
        "headers": {
            n: signed.get(n, "") for n in names if n not in ("x-amz-date", "x-amz-security-token")
        },
        "amz_date": signed.get("x-amz-date", ""),
        "region": region,
        "credentials": credentials,
    }
    env = {**os.environ, "PYTHONPATH": str(BOTOCORE_DIR)}
    done = subprocess.run(
        [sys.executable, "-c", _JUDGE],
        input=json.dumps(query),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    result = json.loads(done.stdout)
    return list(result["problems"]), result["expected"]
