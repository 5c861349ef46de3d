"""Build etcd, the Kubernetes binaries and helm once into a version-keyed cache.

Each binary comes from a small Go wrapper module under ``hack/`` (``hack/k8s``, ``hack/etcd``,
``hack/helm``) with a committed ``go.mod``/``go.sum``; the build output goes to
``~/.cache/swarmkit-operator/<component>/<version>/<binary>`` and is reused afterwards (a build
is a no-op when every binary is present and answers ``--version``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from swarmkit_devcluster.locks import exclusive
from swarmkit_devcluster.paths import (
    BINARIES,
    NODE_BINARIES,
    WEB_AUTH_BINARIES,
    Binary,
    cache_root,
    hack_dir,
)


class BuildError(RuntimeError):
    """A build failed; the message says what to do."""


_VERSION_ARGS: dict[str, list[str]] = {
    "kubectl": ["version", "--client"],
    "helm": ["version", "--short"],
    "ctr": ["--version"],
    "runc": ["--version"],
    "kube-router": ["--version"],
    "containerd-shim-runc-v2": ["-v"],
}
# The CNI plugins answer `VERSION` in the environment, not a flag.
_CNI_PLUGINS = frozenset({"bridge", "host-local", "loopback", "portmap"})


def version_output(b: Binary, timeout: float = 20.0) -> str | None:
    """The binary's ``--version`` output, or None when it is missing or broken."""
    if not b.path.is_file():
        return None
    args = [] if b.name in _CNI_PLUGINS else _VERSION_ARGS.get(b.name, ["--version"])
    env = {**os.environ, "HOME": os.environ.get("HOME", "/tmp")}
    if b.name in _CNI_PLUGINS:
        env["CNI_COMMAND"] = "VERSION"
    try:
        out = subprocess.run(
            [str(b.path), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else ""


def find_go() -> str:
    """The Go toolchain: ``$GO``, ``go`` on PATH, ``$GOROOT/bin/go`` or ``/usr/local/go/bin/go``."""
    candidates: list[str] = []
    if os.environ.get("GO"):
        go = os.environ["GO"]
        if not (os.path.isfile(go) and os.access(go, os.X_OK)):
            raise BuildError(
                f"GO={go} is not an executable Go toolchain. Point GO at `go` (Go 1.26 or newer) "
                "or unset it, then re-run `make cluster-binaries`."
            )
        return go
    which = shutil.which("go")
    if which:
        candidates.append(which)
    if os.environ.get("GOROOT"):
        candidates.append(os.path.join(os.environ["GOROOT"], "bin", "go"))
    candidates += ["/usr/local/go/bin/go", str(Path.home() / "go" / "bin" / "go")]
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise BuildError(
        "the Go toolchain was not found (needed once, to build etcd, kube-apiserver, "
        "kube-controller-manager, kube-scheduler, kubectl and helm).\n"
        "  Install Go 1.26 or newer (https://go.dev/dl/, or your package manager) and put `go` "
        "on PATH, or set GO=/path/to/go, then re-run `make cluster-binaries`."
    )


def _go_env(go: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(go) + os.pathsep + env.get("PATH", "")
    env.setdefault("GOFLAGS", "-mod=mod")
    env.setdefault("CGO_ENABLED", "0")
    env.setdefault("GOTOOLCHAIN", "local")
    return env


_NETWORK_HINTS = (
    "dial tcp",
    "no such host",
    "i/o timeout",
    "connection refused",
    "proxyconnect",
    "TLS handshake timeout",
    "network is unreachable",
    "verifying module",
    'Get "https://',
)


def _download(go: str, module_dir: Path, env: dict[str, str]) -> None:
    """``go mod download`` so a network problem is reported as such, not as a compile error."""
    try:
        res = subprocess.run(
            [go, "mod", "download"],
            cwd=module_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BuildError(_proxy_message(env, "timed out after 30 minutes")) from exc
    if res.returncode != 0:
        err = res.stderr.strip()
        if any(h in err for h in _NETWORK_HINTS):
            raise BuildError(_proxy_message(env, err))
        raise BuildError(f"`go mod download` failed in {module_dir}:\n{err}")


def _proxy_message(env: dict[str, str], detail: str) -> str:
    proxy = env.get("GOPROXY") or "https://proxy.golang.org,direct (default)"
    tail = "\n".join(detail.splitlines()[-5:])
    return (
        f"cannot download Go modules from the module proxy (GOPROXY={proxy}).\n"
        f"{tail}\n"
        "  Check the network/proxy settings (GOPROXY, HTTPS_PROXY) and re-run "
        "`make cluster-binaries`. If only the checksum database (sum.golang.org) is "
        "unreachable, the committed go.sum files are enough: re-run with GONOSUMDB='*' "
        "(or GOSUMDB=off)."
    )


def missing_binaries(names: Iterable[str] | None = None) -> list[str]:
    return [n for n in (names or BINARIES) if not BINARIES[n].path.is_file()]


def build(
    names: Iterable[str] | None = None,
    *,
    force: bool = False,
    log: TextIO | None = None,
) -> dict[str, float]:
    """Build the named binaries (all by default); returns build seconds per binary built."""
    out = log if log is not None else sys.stderr

    def say(msg: str) -> None:
        print(msg, file=out, flush=True)

    every = {**BINARIES, **NODE_BINARIES, **WEB_AUTH_BINARIES}
    selected = [every[n] for n in (names or BINARIES)]
    timings: dict[str, float] = {}
    with exclusive(cache_root() / ".build.lock"):
        todo: list[Binary] = []
        for b in selected:
            v = None if force else version_output(b)
            if v is None:
                todo.append(b)
            else:
                say(f"  {b.name:<24} cached   {b.path}  ({v})")
        if not todo:
            return timings
        go = find_go()
        env = _go_env(go)
        downloaded: set[str] = set()
        total = time.monotonic()
        for b in todo:
            module_dir = hack_dir() / b.module_dir
            if b.module_dir not in downloaded:
                say(f"  downloading Go modules for hack/{b.module_dir} ...")
                _download(go, module_dir, env)
                downloaded.add(b.module_dir)
            b.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = b.path.with_name(b.path.name + ".tmp")
            say(f"  building {b.name} ({b.package}@{b.version}) ... minutes the first time")
            start = time.monotonic()
            cmd = [go, "build", "-trimpath", f"-ldflags=-s -w {b.ldflags}".strip()]
            if b.tags:
                cmd.append(f"-tags={b.tags}")
            cmd += ["-o", str(tmp), b.package]
            # Builds share two cores with everyone else on the machine: lowest priority.
            res = subprocess.run(
                ["nice", "-n", "19", *cmd],
                cwd=module_dir,
                env={**env, "CGO_ENABLED": "1"} if b.cgo else env,
                capture_output=True,
                text=True,
                check=False,
            )
            if res.returncode != 0:
                err = res.stderr.strip()
                if any(h in err for h in _NETWORK_HINTS):
                    raise BuildError(_proxy_message(env, err))
                raise BuildError(f"building {b.name} failed:\n{err[-4000:]}")
            os.replace(tmp, b.path)
            elapsed = time.monotonic() - start
            timings[b.name] = elapsed
            v = version_output(b)
            if v is None:
                raise BuildError(f"{b.path} was built but does not run `--version`")
            say(f"  {b.name:<24} built in {elapsed:6.1f}s  ({v})")
        say(f"  all binaries ready in {time.monotonic() - total:.1f}s under {cache_root()}")
    return timings


def ensure_built(names: Iterable[str] | None = None) -> None:
    """Raise a clear error when binaries are missing (the fixtures never build implicitly)."""
    missing = missing_binaries(names)
    if missing:
        raise BuildError(
            f"missing cluster binaries: {', '.join(missing)} (under {cache_root()}).\n"
            "  Build them once with `make cluster-binaries` "
            "(python -m swarmkit_devcluster build)."
        )
