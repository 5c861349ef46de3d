"""AWS Signature Version 4 for one JSON POST (what the Bedrock runtime API needs).

The canonical request, string to sign and signing key follow the SigV4 specification as
botocore implements it for ``rest-json`` services other than S3 (the path's segments are
URI-encoded once more, the payload hash is not sent as a header); the Bedrock tests check
every signature against botocore's own ``SigV4Auth`` (tests/support/aws.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit


@dataclass(frozen=True)
class AwsCredentials:
    access_key_id: str
    secret_access_key: str
    session_token: str = ""

    @staticmethod
    def parse(value: str) -> AwsCredentials:
        """Credentials in the ``credential_process`` JSON format
        (``{"Version": 1, "AccessKeyId": …, "SecretAccessKey": …, "SessionToken": …}``,
        what ``aws configure export-credentials --format process`` prints)."""
        try:
            data = json.loads(value)
            return AwsCredentials(
                str(data["AccessKeyId"]),
                str(data["SecretAccessKey"]),
                str(data.get("SessionToken") or ""),
            )
        except (ValueError, KeyError, TypeError):
            raise ValueError(
                "the AWS credentials are not credential_process JSON "
                '({"Version": 1, "AccessKeyId": ..., "SecretAccessKey": ...})'
            ) from None


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sign(
    url: str,
    body: bytes,
    credentials: AwsCredentials,
    region: str,
    service: str = "bedrock",
    now: datetime | None = None,
) -> dict[str, str]:
    """The headers that sign ``POST url`` with ``body`` (content type JSON)."""
    when = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    parts = urlsplit(url)
    headers = {
        "content-type": "application/json",
        "host": parts.netloc,
        "x-amz-date": when,
    }
    if credentials.session_token:
        headers["x-amz-security-token"] = credentials.session_token
    signed = ";".join(sorted(headers))
    canonical = "\n".join(
        [
            "POST",
            quote(parts.path or "/", safe="/~"),
            parts.query,
            "".join(f"{k}:{' '.join(headers[k].split())}\n" for k in sorted(headers)),
            signed,
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{when[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", when, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = _hmac(f"AWS4{credentials.secret_access_key}".encode(), when[:8])
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={credentials.access_key_id}/{scope}, "
        f"SignedHeaders={signed}, Signature={signature}"
    )
    del headers["host"]  # httpx sends it
    return headers
