"""Model provider benchmarks (``make bench-providers``); prints the numbers.

Against the scripted model server (tests/support/model_server.py, in its own process, every
request checked against the SDKs' request types as in the tests), per wire format
(Anthropic Messages, OpenAI Chat Completions):

1. **Runner overhead per model call, non-streamed**: the runner's provider
   (``make_provider_for(...).complete``: request building, the rules of
   :mod:`swarmkit_api.model_rules`, httpx, the retry wrapper, answer parsing) minus a bare
   ``httpx`` POST of the same body with ``response.json()``, same server, same connection
   reuse. Mean per call over ``--calls`` calls.
2. The same, **streamed** (server-sent events, an answer of 64 characters in 8-character
   deltas): the provider's stream reader minus a bare httpx stream read (``aiter_lines``).
3. **Time to first token** through the runner (request sent → first text delta parsed, the
   ``first_token_ms`` the ``model.call`` audit line carries) and for the bare reader.

Each figure is min / median / max over ``--repeats`` (3) repeats, after a warm-up.

Usage: ``python bench/bench_providers.py [--calls N] [--repeats N] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
from bench_support import fmt_spread, machine, spread  # noqa: E402

from swarmkit_api.workspace import ModelProvider  # noqa: E402
from swarmkit_runner.providers import ModelRequest, UserMessage, make_provider_for  # noqa: E402
from swarmkit_runner.providers import anthropic as anthropic_wire  # noqa: E402
from swarmkit_runner.providers import openai as openai_wire  # noqa: E402
from swarmkit_runner.secrets import SecretStore  # noqa: E402

ANSWER = "The quick brown fox jumps over the lazy dog; then it rests a while."[:64]
SERVER = f"""
import sys, time
sys.path.insert(0, {str(ROOT)!r})
from tests.support.model_server import Reply, ScriptedModelServer
server = ScriptedModelServer(default=Reply(text={ANSWER!r}, chunk_chars=8)).start()
print(server.port, flush=True)
while True:
    time.sleep(3600)
"""
REQUEST = ModelRequest("Be brief.", [UserMessage("Say something.")], [], max_tokens=256)


def config(wire: str, port: int, streaming: str) -> ModelProvider:
    base = f"http://127.0.0.1:{port}" + ("/v1" if wire == "openai" else "")
    return ModelProvider.model_validate(
        {"name": "bench", "type": wire, "baseUrl": base, "streaming": streaming}
    )


def bare_call(wire: str, port: int, stream: bool) -> tuple[str, dict[str, Any], dict[str, str]]:
    """URL, body and headers the bare client sends (the runner's own wire body)."""
    if wire == "anthropic":
        body = anthropic_wire.to_wire(REQUEST, "claude-bench")
        url = f"http://127.0.0.1:{port}/v1/messages"
        headers = anthropic_wire.AnthropicProvider.headers(None)
    else:
        body = openai_wire.to_wire(REQUEST, "gpt-bench", "max_tokens")
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        headers = openai_wire.OpenAIProvider.headers(None)
        if stream:
            body["stream_options"] = {"include_usage": True}
    if stream:
        body["stream"] = True
    return url, body, headers


async def bare(wire: str, port: int, stream: bool, calls: int) -> tuple[float, float]:
    """(ms per call, ms to first text delta) of a bare httpx client."""
    url, body, headers = bare_call(wire, port, stream)
    marker = '"text_delta"' if wire == "anthropic" else '"content": "'
    firsts: list[float] = []
    async with httpx.AsyncClient(headers=headers, timeout=30) as client:
        start = time.perf_counter()
        for _ in range(calls):
            t0 = time.perf_counter()
            if not stream:
                (await client.post(url, json=body)).json()
                continue
            first = None
            async with client.stream("POST", url, json=body) as response:
                async for line in response.aiter_lines():
                    if first is None and marker in line and '"content": ""' not in line:
                        first = time.perf_counter() - t0
            firsts.append((first or 0.0) * 1000)
        per_call = (time.perf_counter() - start) * 1000 / calls
    return per_call, (sum(firsts) / len(firsts) if firsts else float("nan"))


async def runner(wire: str, port: int, stream: bool, calls: int) -> tuple[float, float]:
    """(ms per call, ms to first token) through the runner's provider."""
    model = "claude-bench" if wire == "anthropic" else "gpt-bench"
    cfg = config(wire, port, "always" if stream else "never")
    provider = make_provider_for(cfg, model, (), SecretStore({}))
    firsts: list[float] = []
    try:
        start = time.perf_counter()
        for _ in range(calls):
            response = await provider.complete(REQUEST)
            assert response.text == ANSWER, response.text
            if response.first_token_ms is not None:
                firsts.append(response.first_token_ms)
        per_call = (time.perf_counter() - start) * 1000 / calls
    finally:
        await provider.aclose()
    return per_call, (sum(firsts) / len(firsts) if firsts else float("nan"))


async def measure(port: int, calls: int, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for wire in ("anthropic", "openai"):
        for stream in (False, True):
            await runner(wire, port, stream, 20)  # warm-up (imports, connections)
            await bare(wire, port, stream, 20)
            overhead, ttft_runner, ttft_bare, per_call = [], [], [], []
            for _ in range(repeats):
                r_call, r_first = await runner(wire, port, stream, calls)
                b_call, b_first = await bare(wire, port, stream, calls)
                overhead.append(r_call - b_call)
                per_call.append(r_call)
                ttft_runner.append(r_first)
                ttft_bare.append(b_first)
            key = f"{wire}/{'streamed' if stream else 'whole'}"
            out[key] = {
                "runner_ms_per_call": spread(per_call),
                "overhead_ms_per_call": spread([o for o in overhead]),
            }
            if stream:
                out[key]["first_token_runner_ms"] = spread(ttft_runner)
                out[key]["first_token_bare_ms"] = spread(ttft_bare)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        results = asyncio.run(measure(port, args.calls, args.repeats))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    if args.json:
        print(json.dumps({"machine": machine(), "results": results}, indent=2))
        return
    print(f"machine: {machine()}; {args.calls} calls per repeat, {args.repeats} repeats")
    print("min / median / max of the per-call mean")
    for key, figures in results.items():
        print(f"{key}:")
        for name, s in figures.items():
            print(f"  {name:24} {fmt_spread(s)}")


if __name__ == "__main__":
    main()
