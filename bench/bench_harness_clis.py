"""Each pinned harness CLI's own cold start on this machine, without a cluster (issue 40).

For each kind (``--kinds``, default codex and gemini-cli), ``--runs`` (3) times: the CLI of
``make harness-clis`` with exactly the argv, environment and files the runner builds
(:mod:`swarmkit_runner.harness`), a one-turn task ("say ok") against the scripted model
server and a streamable-HTTP MCP server (the gateway's transport). Measured: spawn → the
first model request arriving, and spawn → exit. Prints min / median / max of each. The
in-pod numbers (runner and harness in a Run): ``bench/bench_harness.py``. Usage::

    .venv/bin/python bench/bench_harness_clis.py [--kinds codex gemini-cli claude-code]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for sub in ("operator", "hack", "runtime_image", ""):
    sys.path.insert(0, str(REPO / sub))

from tests.support.mcp_servers import HttpMcpServer  # noqa: E402
from tests.support.model_server import ScriptedModelServer, text  # noqa: E402

from swarmkit_devcluster.harness_clis import ensure_harness_clis  # noqa: E402
from swarmkit_runner.harness import harness_for  # noqa: E402
from swarmkit_runner.harness.base import HarnessInvocation  # noqa: E402

#: A model each CLI knows (Codex reaches MCP tools only for models in its catalog).
MODELS = {"codex": "gpt-5.5", "gemini-cli": "gemini-2.5-flash", "claude-code": "claude-sonnet-4-5"}


def once(kind: str, root: Path, mcp: HttpMcpServer) -> tuple[float, float]:
    """(spawn → first model request, spawn → exit) of one run, in seconds."""
    token = secrets.token_urlsafe(16)
    harness = harness_for(kind)
    with ScriptedModelServer(default=text("ok"), api_key=token) as model:
        tmp = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-"))
        for part in ("work", "home", "home/tmp"):
            (tmp / part).mkdir()
        inv = HarnessInvocation(
            prompt="say ok", system_prompt="", model=MODELS[kind], work_dir=tmp / "work",
            home_dir=tmp / "home", skills_dir=None, mcp_url=mcp.url, mcp_token=mcp.token or "",
            model_proxy_url=model.url, model_token=token,
        )  # fmt: skip
        for path, content in harness.files(inv).items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        start = time.time()
        done = subprocess.run(
            harness.argv(harness.executable(root), inv), cwd=inv.work_dir, env=harness.env(inv),
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        total = time.time() - start
        outcome = harness.parse_events(done.stdout.splitlines())
        if outcome.error_reason is not None or not model.requests:
            raise SystemExit(f"{kind}: {outcome.error_message}\n{done.stderr[-1000:]}")
        return model.requests[0].at - start, total


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=["codex", "gemini-cli"], choices=MODELS)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    root = ensure_harness_clis()
    with HttpMcpServer("bench", token=secrets.token_urlsafe(16)) as mcp:
        print(f"{'CLI':<12} {'spawn -> first model request':<30} spawn -> exit (min/median/max)")
        for kind in args.kinds:
            runs = [once(kind, root, mcp) for _ in range(args.runs)]
            first, total = [r[0] for r in runs], [r[1] for r in runs]
            print(f"{kind:<12} {spread(first):<30} {spread(total)}", flush=True)


if __name__ == "__main__":
    main()
