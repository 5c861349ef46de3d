"""Secret values: read only from the env vars the Job sets, and scrubbed from all output.

The Job sets ``secret_env_name(ref)`` for every Secret reference in the bundle (plus the
serve and gateway tokens, all ``SWARMKIT_SECRET_*``, and ``OTEL_EXPORTER_OTLP_HEADERS``).
The :class:`SecretStore` registers **every** such value when it is made, at the start of
``run``, ``serve`` and ``gateway``, before anything is printed, exported or reported:
a value the run never reads is scrubbed all the same (a user pastes it, a model repeats
it, a tool echoes it). Each value is replaced by ``[REDACTED]`` in every audit line,
error message, span, checkpoint, effect, review item and the run result, and so is each
encoding of it that commonly appears in text:

* JSON-escaped (``"`` ``\\`` control and non-ASCII characters as ``json.dumps`` writes them);
* URL-encoded (``%XX``, and ``+`` for spaces);
* base64, standard and URL-safe, at each of the three alignments: a value inside a larger
  encoded blob (``Basic`` auth of ``user:secret``) starts at byte offset 0, 1 or 2 of a
  3-byte group, and each gives different characters; only the characters fully determined
  by the value are matched;
* each line of a multi-line value (a PEM key quoted line by line).

Values shorter than :data:`MIN_SCRUB_LENGTH` are not scrubbed: redacting every ``1234`` in
ordinary text would mangle output and, by the holes it leaves, tell the reader the secret;
such a value is reported by name (:meth:`SecretStore.too_short`) so the run warns.
The process itself is kept out of reach of what it starts: :func:`seal_process`.
"""

from __future__ import annotations

import base64
import ctypes
import io
import json
import os
import re
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO, cast
from urllib.parse import quote, quote_plus, unquote

from swarmkit_api.bundle import secret_env_name
from swarmkit_api.common import SecretKeyRef

SECRET_ENV_PREFIX = "SWARMKIT_SECRET_"
#: Environment variables holding OTLP exporter headers (``k=v,k2=v2``; values from a Secret).
HEADER_ENVS = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
REDACTED = "[REDACTED]"
#: Shorter values are not scrubbed (see the module docstring); 8 characters is the shortest
#: password most policies accept, and a string that short is still rare in ordinary text.
MIN_SCRUB_LENGTH = 8


class MissingSecret(Exception):
    """The env var for a Secret reference is not set."""

    def __init__(self, ref: SecretKeyRef) -> None:
        super().__init__(
            f"secret {ref.name}/{ref.key} is not available (env {secret_env_name(ref)} unset)"
        )
        self.ref = ref


def _base64_forms(value: bytes) -> set[str]:
    """The characters of ``value``'s base64 (standard and URL-safe) that do not depend on
    the bytes around it, at each of the three alignments within a 3-byte group."""
    forms: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + value).decode().rstrip("=")
        first = -(-8 * offset // 6)  # the first character holding no bit of the padding
        last = 8 * (offset + len(value)) // 6  # past the last one holding only value bits
        part = encoded[first:last]
        forms.add(part)
        forms.add(part.replace("+", "-").replace("/", "_"))
    return forms


def encoded_forms(value: str) -> set[str]:
    """``value`` and the encodings of it that are scrubbed too (see the module docstring)."""
    forms = {value}
    forms.add(json.dumps(value)[1:-1])
    forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
    forms.add(quote(value, safe=""))
    forms.add(quote_plus(value, safe=""))
    forms |= _base64_forms(value.encode())
    return {f for f in forms if len(f) >= MIN_SCRUB_LENGTH}


def environ_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """Every secret-bearing value in ``environ`` by the variable's name: each
    ``SWARMKIT_SECRET_*`` and each header value of the OTLP header variables."""
    found = {k: v for k, v in environ.items() if k.startswith(SECRET_ENV_PREFIX) and v}
    for name in HEADER_ENVS:
        for i, item in enumerate(environ.get(name, "").split(",")):
            _, _, value = item.partition("=")
            if value.strip():
                found[f"{name}[{i}]"] = value.strip()
                found[f"{name}[{i}]:decoded"] = unquote(value.strip())  # the SDK decodes it
    return found


class SecretStore:
    """Reads secret values from the environment; knows every one of them from the start."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ if environ is not None else os.environ
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._short: list[str] = []
        #: Files whose content is a secret too, and what their content was last read as.
        self._files: dict[Path, tuple[int, int, int] | None] = {}
        # A value learned while another thread compiles the pattern must not be lost (a
        # rotated token is learned while output is scrubbed, from any thread).
        self._lock = threading.Lock()
        for name, value in sorted(environ_secrets(self._environ).items()):
            if len(value) < MIN_SCRUB_LENGTH and name.startswith(SECRET_ENV_PREFIX):
                self._short.append(name)
            self.remember(value)

    def too_short(self) -> list[str]:
        """The variables whose value is too short to be scrubbed (names, never values)."""
        return list(self._short)

    def get(self, ref: SecretKeyRef) -> str:
        """The value of ``ref``; raises :class:`MissingSecret` when its env var is unset."""
        value = self._environ.get(secret_env_name(ref))
        if value is None:
            raise MissingSecret(ref)
        self.remember(value)
        return value

    def remember(self, value: str) -> None:
        """Scrub ``value`` (and its encodings) from output as well (e.g. a composed header)."""
        pieces = [value, *(line.strip() for line in value.splitlines() if "\n" in value)]
        new = set().union(*(encoded_forms(p) for p in pieces)) - self._values
        if new:
            with self._lock:
                self._values |= new
                self._pattern = None

    def watch_file(self, path: Path) -> None:
        """Scrub the content of the file at ``path`` too, as it is each time output is
        scrubbed: a credential the kubelet mounts into the pod and rotates in place (the
        MCP gateway's service-account token), which any process of the pod (a bash call, an
        MCP server, a script) can read and print. A stat per scrub; read again only when
        the file changed (the kubelet swaps in a new file). A missing file is no secret."""
        self._files.setdefault(path, None)
        self._refresh_files()

    def _refresh_files(self) -> None:
        for path, seen in list(self._files.items()):
            try:
                st = path.stat()
                key = (st.st_ino, st.st_mtime_ns, st.st_size)
                if key == seen:
                    continue
                value = path.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                continue
            if value:
                self.remember(value)
            self._files[path] = key  # after: a thread that sees the new key knows the value

    def scrub(self, text: str) -> str:
        """``text`` with every known secret value (and encoding) replaced by ``[REDACTED]``."""
        if self._files:
            self._refresh_files()
        if not self._values or not text:
            return text
        pattern = self._pattern
        if pattern is None:
            with self._lock:
                pattern = self._pattern
                if pattern is None:
                    # Longest first: at one position the alternation takes the first match.
                    ordered = sorted(self._values, key=lambda v: (-len(v), v))
                    pattern = re.compile("|".join(re.escape(v) for v in ordered))
                    self._pattern = pattern
        return pattern.sub(REDACTED, text)


def hide_secret_environ(prefix: str = SECRET_ENV_PREFIX) -> int:
    """Overwrite the secret values in this process's original environment block with ``*``.

    ``/proc/<pid>/environ`` shows that block (the strings ``execve`` put on the stack), not
    ``os.environ``; any process of the same user (a skill script, an MCP server) could read
    the runner's secrets there through its parent pid. Python copied the environment into
    ``os.environ`` at start-up, so the runner keeps the values; the block only keeps their
    lengths. Every subprocess gets an explicit environment, so none inherits the masked
    block. Linux only; returns how many values were masked (0 when nothing matched or the
    block could not be located safely).
    """
    if not sys.platform.startswith("linux"):
        return 0
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (stat fields 50, 51)
        expected = Path("/proc/self/environ").read_bytes()
    except (OSError, IndexError, ValueError):
        return 0
    if end <= start or end - start != len(expected):
        return 0
    if ctypes.string_at(start, end - start) != expected:
        return 0  # not the block we think it is: touch nothing
    masked = 0
    offset = 0
    needle = prefix.encode()
    for entry in expected.split(b"\0"):
        if entry.startswith(needle) and b"=" in entry:
            value_at = offset + entry.index(b"=") + 1
            length = len(entry) - entry.index(b"=") - 1
            if length:
                ctypes.memset(start + value_at, ord("*"), length)
                masked += 1
        offset += len(entry) + 1
    return masked


PR_SET_DUMPABLE = 4


def seal_process() -> int:
    """Put this process's secrets out of reach of every process it starts.

    1. The secret values in the original environment block are masked
       (:func:`hide_secret_environ`), so ``/proc/<pid>/environ`` shows only their names.
    2. The process becomes non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): the kernel then
       owns its ``/proc/<pid>/environ``, ``mem``, ``fd`` and ``maps`` by root and refuses
       them to any process without ``CAP_SYS_PTRACE``, so a script, a bash call or an MCP
       server running under the same uid cannot read the values from the runner's memory
       either. Children start dumpable again after ``execve`` (they hold only what they
       were given); a ``fork`` of this process (the PID 1 reaper's worker) stays sealed.

    Must run before anything reads ``/proc/self/environ`` for the last time (the mask does,
    and a non-dumpable process may not open its own). Linux only; returns how many values
    were masked.
    """
    masked = hide_secret_environ() + sum(hide_secret_environ(name) for name in HEADER_ENVS)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            print("swarmkit-runner: cannot make the process non-dumpable", file=sys.stderr)
    return masked


class ScrubbedStream(io.TextIOBase):
    """A text stream that scrubs every write: ``sys.stdout`` and ``sys.stderr`` of the
    runner, so a traceback, a library's log line or a ``print`` nobody scrubbed cannot put
    a value in the pod log (which ``FallbackToLogsOnError`` may copy into the Run's status).
    A value a caller writes in two pieces is not caught (``print`` writes it whole). A child
    process writes to :meth:`pipe` instead of the inherited descriptor (an MCP server's
    stderr), so its lines are scrubbed too."""

    def __init__(self, inner: TextIO, secrets: SecretStore) -> None:
        self._inner = inner
        self._secrets = secrets

    def write(self, text: str) -> int:
        self._inner.write(self._secrets.scrub(text))
        return len(text)

    def flush(self) -> None:
        self._inner.flush()

    def pipe(self) -> int:
        """A descriptor for a child's output: each line written to it reaches this stream
        scrubbed (a daemon thread copies it). The caller closes it once the child has it."""
        read_fd, write_fd = os.pipe()

        def copy() -> None:
            with open(read_fd, encoding="utf-8", errors="replace") as source:
                for line in source:
                    self.write(line)
                    self.flush()

        threading.Thread(target=copy, name="scrubbed-pipe", daemon=True).start()
        return write_fd

    def fileno(self) -> int:
        return self._inner.fileno()

    def isatty(self) -> bool:
        return self._inner.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._inner.encoding


def scrub_standard_streams(secrets: SecretStore) -> None:
    """Scrub everything this process prints on stdout and stderr from here on."""
    if not isinstance(sys.stdout, ScrubbedStream):
        sys.stdout = cast(TextIO, ScrubbedStream(sys.stdout, secrets))
    if not isinstance(sys.stderr, ScrubbedStream):
        sys.stderr = cast(TextIO, ScrubbedStream(sys.stderr, secrets))
