"""The scrubber knows every secret value of the pod from the start, and its encodings."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import time
from urllib.parse import quote, quote_plus

import pytest

from swarmkit_runner.secrets import (
    MIN_SCRUB_LENGTH,
    REDACTED,
    ScrubbedStream,
    SecretStore,
    encoded_forms,
)

NEVER_READ = "s3cr3t-partner-token-1234"
WITH_QUOTES = 'pa"ss\\wörd/with+spaces and=signs'
ENV = {
    "SWARMKIT_SECRET_PARTNER_API_TOKEN": NEVER_READ,
    "SWARMKIT_SECRET_ODD_VALUE": WITH_QUOTES,
    "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20otlp-header-value,x-org=acme-org-7",
    "PATH": "/usr/bin",
}


def test_a_value_the_run_never_read_is_scrubbed_from_the_start() -> None:
    store = SecretStore(ENV)
    assert store.scrub(f"the token is {NEVER_READ}") == f"the token is {REDACTED}"
    assert store.scrub("authorization: Bearer otlp-header-value") == f"authorization: {REDACTED}"
    assert store.scrub("Bearer%20otlp-header-value") == REDACTED  # as the variable holds it
    assert store.scrub("acme-org-7") == REDACTED
    assert store.scrub("/usr/bin") == "/usr/bin"  # not a secret variable


@pytest.mark.parametrize("value", [NEVER_READ, WITH_QUOTES])
def test_json_and_url_encodings_are_scrubbed(value: str) -> None:
    store = SecretStore(ENV)
    for text in (
        json.dumps({"input": f"x {value} y"}),
        json.dumps({"input": f"x {value} y"}, ensure_ascii=False),
        "https://h/?q=" + quote(value, safe=""),
        "form=" + quote_plus(value),
    ):
        out = store.scrub(text)
        assert REDACTED in out, text
        for form in encoded_forms(value):
            assert form not in out, (text, form)


@pytest.mark.parametrize("prefix", ["", "u", "us", "user:", "a longer prefix "])
@pytest.mark.parametrize("suffix", ["", "!", "tail"])
def test_base64_at_every_alignment_is_scrubbed(prefix: str, suffix: str) -> None:
    store = SecretStore(ENV)
    blob = (prefix + NEVER_READ + suffix).encode()
    for encoded in (base64.b64encode(blob), base64.urlsafe_b64encode(blob)):
        out = store.scrub(f"Authorization: Basic {encoded.decode()}")
        assert REDACTED in out
        # no window of what is left decodes to (most of) the value, at any alignment
        left = out.rsplit(" ", 1)[-1]
        for start in range(len(left)):
            for end in range(start + 4, len(left) + 1, 4):
                for altchars in (b"+/", b"-_"):
                    try:
                        decoded = base64.b64decode(left[start:end], altchars, validate=True)
                    except ValueError:
                        decoded = b""
                    assert NEVER_READ[2:-2].encode() not in decoded


def test_short_values_are_not_scrubbed_but_named() -> None:
    store = SecretStore({"SWARMKIT_SECRET_PIN": "1234", **ENV})
    assert store.scrub("call 1234 now") == "call 1234 now"
    assert store.too_short() == ["SWARMKIT_SECRET_PIN"]
    assert all(len(f) >= MIN_SCRUB_LENGTH for f in encoded_forms("12345678"))


def test_each_line_of_a_multi_line_value_is_scrubbed() -> None:
    line = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"
    key = f"-----BEGIN KEY-----\n{line}\nBKcwggSjAgEAAoIBAQC7\n-----END KEY-----"
    store = SecretStore({"SWARMKIT_SECRET_KEY": key})
    assert store.scrub(f"line: {line}") == f"line: {REDACTED}"


def test_longest_match_wins_when_values_overlap() -> None:
    store = SecretStore({"SWARMKIT_SECRET_A": "abcdefgh", "SWARMKIT_SECRET_B": "abcdefgh-longer"})
    assert store.scrub("x abcdefgh-longer y") == f"x {REDACTED} y"


def test_scrubbed_stream_scrubs_every_write() -> None:
    inner = io.StringIO()
    stream = ScrubbedStream(inner, SecretStore(ENV))
    print(f"Traceback: ValueError({NEVER_READ!r})", file=stream)
    assert NEVER_READ not in inner.getvalue() and REDACTED in inner.getvalue()


def test_a_child_writing_to_the_scrubbed_pipe_is_scrubbed_line_by_line() -> None:
    inner = io.StringIO()
    stream = ScrubbedStream(inner, SecretStore(ENV))
    fd = stream.pipe()
    code = f"import sys; print('server: token {NEVER_READ}', file=sys.stderr)"
    subprocess.run([sys.executable, "-c", code], stderr=fd, check=True)
    os.close(fd)
    deadline = time.monotonic() + 5
    while "server:" not in inner.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert inner.getvalue() == f"server: token {REDACTED}\n"
