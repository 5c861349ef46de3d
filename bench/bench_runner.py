"""Runner benchmarks (``make bench-runner``); prints the numbers.

1. Cold start: ``python -m swarmkit_runner run`` process start → first model request (a
   local OpenAI-compatible endpoint), with 20 granted skills and no MCP server (target: under
   0.8 s), and with 20 skills of which 10 are mcp_tool skills on 2 MCP servers (the SDK test
   server over stdio, started by the runner, and one over streamable HTTP, already running;
   target: under 1.5 s). ``--runs`` (9) runs each after a warm-up; min / median / max, with
   the load average (1 min) before each run and the CPU (user + system) each run used (the
   runner, and the stdio server it starts): less sensitive to the machine's load than wall
   time. Then the same in the runtime image (``make images``; its root filesystem under
   the process node's launcher, as a pod starts) as a ratio to a bare interpreter start in
   that image through the same launcher (target: 1.5x), alternately with its floor: an
   interpreter that only imports what the runner has imported by its first model request
   (found by a profiling run with ``-X importtime`` in the image, whose ten slowest imports
   are printed): runner / imports floor is what the runner's own work costs, imports floor /
   bare interpreter what its imports cost.
2. Level-1 catalog cost: the system prompt of 100 granted skills at level 1 (plus the two
   synthetic tool schemas) versus inlining every SKILL.md body.
3. MCP per-call overhead: a tool call through the runner's catalog + MCP client (audit
   included) versus a direct ``mcp`` SDK ``call_tool`` on the same server, for stdio and HTTP.
4. Skill pipeline overhead: the seeds' ``code-quality-review`` decision skill (mcp_tool on
   stdio, with constraints and its outputs schema enforced) versus the same MCP tool listed
   directly; and one command-pack call (argv template, contained process) end to end.

Usage: ``python bench/bench_runner.py [--runs N] [--calls N] [--cold-only] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_support import fmt_spread, loadavg, machine, spread  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from tests.support.bundles import (  # noqa: E402
    agent,
    bundle,
    decision_skill,
    http_server,
    mcp_tool_skill,
    openai_provider,
    skill,
    stdio_server,
    write_bundle,
)
from tests.support.mcp_servers import HttpMcpServer, stdio_command  # noqa: E402
from tests.support.model_server import ScriptedModelServer, text  # noqa: E402
from tests.support.runner import runner_env  # noqa: E402

from swarmkit_runner.audit import AuditLog  # noqa: E402
from swarmkit_runner.bundle import root_position  # noqa: E402
from swarmkit_runner.context import Budget, RunContext  # noqa: E402
from swarmkit_runner.loop import AgentRunner, needed_servers  # noqa: E402
from swarmkit_runner.mcp_client import McpManager  # noqa: E402
from swarmkit_runner.paths import RunnerPaths  # noqa: E402
from swarmkit_runner.providers import ToolCall  # noqa: E402
from swarmkit_runner.secrets import SecretStore  # noqa: E402
from swarmkit_runner.skills import (  # noqa: E402
    LOAD_SKILL_SCHEMA,
    READ_SKILL_FILE_SCHEMA,
    system_prompt,
)

BODY_PARAGRAPH = (
    "When the situation matches, first gather the facts: which service, which region, since "
    "when, and what the user sees. Then compare them with the reference material bundled "
    "with this skill, pick the matching procedure and follow it step by step, recording "
    "each decision and its reason so that a reviewer can retrace it later.\n"
)


def _description(n: int) -> str:
    return (
        f"Use when the task involves area {n}: diagnosing, explaining or changing it, or when "
        f"a user asks how area {n} is handled here."
    )


def _body(n: int) -> str:
    steps = "".join(f"{i}. Step {i} of procedure {n}: {BODY_PARAGRAPH}" for i in range(1, 9))
    return f"# Skill {n}\n\n{BODY_PARAGRAPH}\n## Procedure\n\n{steps}"


# --------------------------------------------------------------------------- cold start


def cold_start(runs: int, with_mcp: bool) -> dict[str, Any]:
    """``runs`` cold starts (after one uncounted warm-up): process start → first model
    request, 20 granted skills; with ``with_mcp`` 10 of them are mcp_tool skills on two MCP
    servers (one stdio server the runner starts, one streamable-HTTP server already up)."""
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        skills = [
            skill(
                f"guide-{i}",
                _description(20 + i),
                instructions=_body(i),
                files={"reference/notes.md": "notes"},
            )
            for i in range(10 if with_mcp else 20)
        ]
        servers = []
        if with_mcp:
            http_mcp = stack.enter_context(HttpMcpServer(name="bench-http"))
            servers = [
                stdio_server("local", stdio_command("bench-stdio")),
                http_server("remote", http_mcp.url),
            ]
            skills += [
                mcp_tool_skill(f"local-{i}", "local", tool, description=_description(i))
                for i, tool in enumerate(["echo", "add", "search_docs", "read_env", "whoami"])
            ]
            skills += [
                mcp_tool_skill(f"remote-{i}", "remote", tool, description=_description(10 + i))
                for i, tool in enumerate(["echo", "add", "search_docs", "sleep", "whoami"])
            ]
        samples: list[float] = []
        loads: list[float] = []
        cpu: list[float] = []  # the whole run's CPU (user + system), MCP servers included
        ready: list[float] = []
        for n in range(runs + 1):  # the first run warms the page cache and is not counted
            with ScriptedModelServer([text("done")]) as server:
                b = bundle(
                    agents=[agent("bench", provider="m", skills=[s.name for s in skills])],
                    skills=skills,
                    providers=[openai_provider("m", server.openai_base_url)],
                    mcp_servers=servers,
                )
                layout = write_bundle(b, Path(tmp) / f"run-{n}")
                argv = [sys.executable, "-m", "swarmkit_runner", "run", *layout.cli_args()]
                load = loadavg()[0]
                usage = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.time()
                proc = subprocess.run(argv, env=runner_env(), capture_output=True, text=True)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if proc.returncode != 0 or not server.requests:
                    raise SystemExit(f"runner failed: {proc.stderr[-2000:]}")
                first = server.requests[0]
                expected = 12 if with_mcp else 2  # mcp_tool skills + load_skill/read_skill_file
                assert len(first.tool_names) == expected, first.tool_names
                if n:
                    samples.append(first.at - start)
                    loads.append(load)
                    cpu.append(
                        1000 * (after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime)
                    )
                    events = [json.loads(line) for line in proc.stdout.splitlines()]
                    ready += [e["duration_ms"] for e in events if e["event"] == "mcp.ready"]
    ms = [s * 1000 for s in samples]
    return {
        "runs": runs,
        "granted_skills": len(skills),
        "mcp_servers": len(servers),
        "ms": spread(ms),
        "samples_ms": [round(v, 1) for v in ms],
        "loadavg_1m": spread(loads),
        "cpu_ms": spread(cpu),
        "mcp_ready_median_ms": round(statistics.median(ready), 1) if ready else None,
        "target_ms": 800 if not with_mcp else 1500,
    }


# --------------------------------------------------------------------------- in the image

SANDBOX = ROOT / "hack" / "swarmkit_devcluster" / "process_node" / "sandbox.py"
IN_IMAGE = "/bench"  # where the run's bundle directory is bound inside the image
#: What the profiling run's wrapper writes to stderr when the runner opens its first
#: connection (the model request: the bundle has no MCP server); imports after it are not
#: part of the cold start.
FIRST_CONNECT = "--- swarmkit bench: first connect ---"
#: The profiling run (``python -X importtime -c PROFILE run ...``): the runner as ``python -m
#: swarmkit_runner`` runs it (runpy), with a one-shot hook that marks its first connect.
PROFILE = (
    "import os, runpy, socket\n"
    "connect = socket.socket.connect\n"
    "def first(self, address):\n"
    "    socket.socket.connect = connect\n"
    f"    os.write(2, b'{FIRST_CONNECT}\\n')\n"
    "    return connect(self, address)\n"
    "socket.socket.connect = first\n"
    "runpy.run_module('swarmkit_runner', run_name='__main__', alter_sys=True)\n"
)


def _in_image(image: Any, argv: list[str], env: dict[str, str], tmp: Path, n: int) -> Any:
    """Start ``argv`` in ``image``'s root filesystem through the process node's launcher (a
    mount namespace, the rootfs under a writable overlay, ``tmp`` bound at /bench, the
    image's user and working directory), as a pod's container starts: the Popen."""
    uid, _, gid = (image.user or "0:0").partition(":")
    spec = {
        "image": str(image.rootfs),
        "upper": str(tmp / f"upper-{n}"),
        "root": str(tmp / f"root-{n}"),
        "errorFile": str(tmp / f"error-{n}"),
        "argv": argv,
        "mounts": [{"source": str(tmp), "target": IN_IMAGE}],
        "cwd": IN_IMAGE,
        "envKeys": sorted(env),
        "user": [int(uid), int(gid or uid), []],
        "noNewPrivs": True,
    }
    path = tmp / f"spec-{n}.json"
    path.write_text(json.dumps(spec))
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(SANDBOX), str(path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def runtime_image() -> Any:
    """This checkout's runtime image as ``make images`` built it (None: not built)."""
    from swarmkit_devcluster.imagebuild.build import store_dir
    from swarmkit_devcluster.imagebuild.pins import IMAGES
    from swarmkit_devcluster.process_node.images import ImageStore

    spec = next(s for s in IMAGES if s.name == "runtime")
    return ImageStore(store_dir(), ROOT).resolve(spec.reference)


def import_profile(stderr: str) -> list[tuple[str, float, float, int]]:
    """``-X importtime`` lines up to :data:`FIRST_CONNECT`: (module, self ms, cumulative ms,
    depth; 0 = imported by no other import: the runner's own or a lazy import in a function)."""
    rows = []
    for line in stderr.partition(FIRST_CONNECT)[0].splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        rows.append((name.strip(), int(own) / 1000, int(cumulative) / 1000, depth))
    return rows


def imports_only(profile: list[tuple[str, float, float, int]]) -> str:
    """A ``-c`` program importing the profile's depth-0 modules in the runner's order, each
    attempt as often as the runner made it: an import the runner tried and did without (a
    module the image lacks, such as ``sniffio``) is tried and skipped here too. It ends with
    ``os._exit``: the runner's figure ends at its request, not after the interpreter's
    teardown of ~500 modules (tens of ms)."""
    names = [name for name, _, _, depth in profile if depth == 0]
    return (
        "import importlib, os\n"
        f"for name in {names!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError:\n"
        "        pass\n"
        "os._exit(0)\n"
    )


def _in_image_timed(image: Any, argv: list[str], env: dict[str, str], tmp: Path, n: int) -> float:
    """Seconds from launching ``argv`` in the image (see :func:`_in_image`) to its exit 0."""
    start = time.time()
    proc = _in_image(image, argv, env, tmp, n)
    _, err = proc.communicate(timeout=60)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:2]} in the image failed: {err[-2000:]}")
    return time.time() - start


def _runner_in_image(
    image: Any, prefix: list[str], env: dict[str, str], tmp: Path, n: int
) -> tuple[float, str]:
    """The runner (``prefix`` + ``run`` + the bundle's paths, 20 granted skills) in the image:
    seconds from launch to its first model request, and its stderr."""
    skills = [skill(f"guide-{i}", _description(20 + i), instructions=_body(i)) for i in range(20)]
    with ScriptedModelServer([text("done")]) as server:
        b = bundle(
            agents=[agent("bench", provider="m", skills=[s.name for s in skills])],
            skills=skills,
            providers=[openai_provider("m", server.openai_base_url)],
        )
        layout = write_bundle(b, tmp / f"run-{n}")
        for d in (layout.root, layout.scratch, *layout.root.rglob("*")):
            os.chmod(d, 0o777 if d.is_dir() else 0o666)
        # the same paths, as the container sees them
        inside = [a.replace(str(tmp), IN_IMAGE) for a in layout.cli_args()]
        start = time.time()
        proc = _in_image(image, [*prefix, "run", *inside], env, tmp, n)
        _, err = proc.communicate(timeout=120)
        if proc.returncode != 0 or not server.requests:
            raise SystemExit(f"runner in the image failed: {err[-2000:]}")
        return server.requests[0].at - start, err


def _ratios(numerators: list[float], denominators: list[float]) -> dict[str, float]:
    """min / median / max of the pairwise ratios (two decimals: a goal is 1.5x)."""
    return spread([a / b for a, b in zip(numerators, denominators, strict=True)], 2)


def cold_start_image(runs: int) -> dict[str, Any]:
    """The runner's cold start inside the runtime image (process start → first model
    request, 20 granted skills) as a ratio to a bare interpreter start in the same image
    through the same launcher (``python -c pass``: start → exit), and its floor, the imports
    alone (start → imports done, see :func:`imports_only`): every module the runner itself
    imported before its first model request (the depth-0 names of a profiling run's ``-X
    importtime`` in the image, up to its first connect: its top-level imports and the lazy
    ones in functions, which pull in the rest; importing ``swarmkit_runner.__main__`` alone
    would leave out the HTTP client and more, about 30 % of the modules), and nothing of the
    runner's own work. The three alternate; the profiling run (uncounted, like the first
    round) also gives the slowest imports by cumulative time."""
    image = runtime_image()
    if image is None:
        return {"skipped": "the runtime image of this checkout is not built: make images"}
    env = dict(kv.split("=", 1) for kv in (f"{k}={v}" for k, v in image.env))
    python = image.entrypoint[0] if image.entrypoint else "python3"
    runner: list[float] = []
    bare: list[float] = []
    imports: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-runner-image-") as name:
        tmp = Path(name)
        os.chmod(tmp, 0o777)  # the image's user writes its scratch and termination log here
        profiling = [python, "-X", "importtime", "-c", PROFILE]
        profile = import_profile(_runner_in_image(image, profiling, env, tmp, 0)[1])
        floor = [python, "-c", imports_only(profile)]
        for n in range(1, runs + 2):  # the first round warms the page cache, not counted
            seconds = _in_image_timed(image, [python, "-c", "pass"], env, tmp, 3 * n)
            bare.append(seconds)
            imports.append(_in_image_timed(image, floor, env, tmp, 3 * n + 1))
            runner.append(_runner_in_image(image, image.entrypoint, env, tmp, 3 * n + 2)[0])
    runner, bare, imports = runner[1:], bare[1:], imports[1:]
    return {
        "runs": runs,
        "granted_skills": 20,
        "image": str(image.rootfs),
        "runner_ms": spread([v * 1000 for v in runner]),
        "bare_interpreter_ms": spread([v * 1000 for v in bare]),
        "imports_floor_ms": spread([v * 1000 for v in imports]),
        "imports_floor_modules": len({name for name, *_ in profile}),
        "x_bare": _ratios(runner, bare),
        "x_imports_floor": _ratios(runner, imports),
        "imports_floor_x_bare": _ratios(imports, bare),
        "top_imports": [
            {"module": m, "cumulative_ms": round(c, 1), "self_ms": round(o, 1), "depth": d}
            for m, o, c, d in sorted(profile, key=lambda row: -row[2])[:10]
        ],
        "target_x": 1.5,
    }


# --------------------------------------------------------------------------- level 1


def level_one_cost(count: int = 100) -> dict[str, Any]:
    skills = [skill(f"skill-{i:03d}", _description(i), instructions=_body(i)) for i in range(count)]
    base = "You are the platform's support agent. Be precise and cite what you used."
    level1 = system_prompt(base, skills)
    tool_schemas = json.dumps(
        [
            {"name": "load_skill", "input_schema": LOAD_SKILL_SCHEMA},
            {"name": "read_skill_file", "input_schema": READ_SKILL_FILE_SCHEMA},
        ]
    )
    inline = (
        base
        + "\n\n"
        + "\n\n".join(
            f"## Skill: {s.name}\n{s.spec.description}\n\n{s.spec.instructions}" for s in skills
        )
    )
    level1_total = len(level1) + len(tool_schemas)
    return {
        "skills": count,
        "avg_body_chars": round(statistics.mean(len(s.spec.instructions) for s in skills)),
        "level1_chars": level1_total,
        "inline_chars": len(inline),
        "level1_tokens_est": level1_total // 4,
        "inline_tokens_est": len(inline) // 4,
        "ratio_inline_over_level1": round(len(inline) / level1_total, 1),
    }


# --------------------------------------------------------------------------- MCP overhead


async def _direct(transport: Any, calls: int) -> list[float]:
    async with Client(transport) as client:
        for _ in range(20):
            await client.call_tool("echo", {"text": "x"})
        out = []
        for _ in range(calls):
            t0 = time.perf_counter()
            await client.call_tool("echo", {"text": "x"})
            out.append(time.perf_counter() - t0)
    return out


async def _through_runner(server: Any, calls: int, tmp: Path) -> list[float]:
    b = bundle(agents=[agent("bench", tools=[f"{server.tool_prefix}.echo"])], mcp_servers=[server])
    layout = write_bundle(b, tmp)
    paths = RunnerPaths.resolve(
        str(layout.bundle_dir), str(layout.skills_dir), str(layout.scratch), None
    )
    secrets = SecretStore({})
    with open(os.devnull, "w") as null:
        audit = AuditLog(b.run.uid, b.run.correlation_id, secrets, sink=null)
        ctx = RunContext(b, paths, audit, secrets, Budget(100, 10**9))
        ctx.mcp = McpManager(needed_servers(b), secrets, audit)
        await ctx.mcp.start()
        try:
            catalog, _ = AgentRunner(ctx).build_catalog(root_position(b), 0)
            call = ToolCall("c", f"{server.tool_prefix}.echo", {"text": "x"})
            for _ in range(20):
                await catalog.call(call)
            out = []
            for _ in range(calls):
                t0 = time.perf_counter()
                result = await catalog.call(call)
                out.append(time.perf_counter() - t0)
                assert not result.is_error, result.content
        finally:
            await ctx.mcp.aclose()
    return out


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "mean_ms": round(statistics.mean(samples) * 1000, 3),
        "p50_ms": round(ordered[len(ordered) // 2] * 1000, 3),
        "p95_ms": round(ordered[int(len(ordered) * 0.95)] * 1000, 3),
    }


async def mcp_overhead(calls: int) -> dict[str, Any]:
    results: dict[str, Any] = {"calls": calls}
    with tempfile.TemporaryDirectory() as tmp, HttpMcpServer(name="bench-http") as http_mcp:
        command = stdio_command("bench-stdio")
        params = StdioServerParameters(command=command[0], args=command[1:])
        for name, direct_transport, server in (
            ("stdio", stdio_client(params), stdio_server("t", command)),
            ("http", streamable_http_client(http_mcp.url), http_server("h", http_mcp.url)),
        ):
            direct = _stats(await _direct(direct_transport, calls))
            runner = _stats(await _through_runner(server, calls, Path(tmp) / name))
            results[name] = {
                "direct_sdk": direct,
                "runner": runner,
                "overhead_p50_ms": round(runner["p50_ms"] - direct["p50_ms"], 3),
                "overhead_mean_ms": round(runner["mean_ms"] - direct["mean_ms"], 3),
            }
    return results


async def _catalog_calls(
    b: Any, tmp: Path, calls: int, tool: str, args: dict[str, Any]
) -> list[float]:
    layout = write_bundle(b, tmp)
    paths = RunnerPaths.resolve(
        str(layout.bundle_dir), str(layout.skills_dir), str(layout.scratch), None
    )
    secrets = SecretStore({})
    with open(os.devnull, "w") as null:
        audit = AuditLog(b.run.uid, b.run.correlation_id, secrets, sink=null)
        ctx = RunContext(b, paths, audit, secrets, Budget(100, 10**9))
        ctx.mcp = McpManager(needed_servers(b), secrets, audit)
        await ctx.mcp.start()
        try:
            catalog, _ = AgentRunner(ctx).build_catalog(root_position(b), 0)
            call = ToolCall("c", tool, args)
            for _ in range(min(20, calls)):
                await catalog.call(call)
            out = []
            for _ in range(calls):
                t0 = time.perf_counter()
                result = await catalog.call(call)
                out.append(time.perf_counter() - t0)
                assert not result.is_error, result.content
        finally:
            await ctx.mcp.aclose()
            await ctx.aclose()
    return out


async def skill_overhead(calls: int) -> dict[str, Any]:
    """A governed decision skill call vs the bare MCP tool; one command-pack call."""
    diff = "diff --git a/app.py b/app.py\n+# TODO\n"
    server = stdio_server("review", stdio_command("bench-review"))
    review = decision_skill(
        "code-quality-review",
        {"type": "mcp_tool", "server": "review", "tool": "check_quality"},
        constraints={"timeoutSeconds": 30, "retry": {"attempts": 1}, "maxLatencyMs": 1000},
        iam={"requiredScopes": ["repo:read"]},
    )
    pack = {
        "id": "tools",
        "requires": [sys.executable],
        "commands": [
            {
                "name": "echo",
                "description": "Echo.",
                "argv": [sys.executable, "-c", "import sys; print(sys.argv[1])", "{text}"],
                "effects": "read",
            }
        ],
    }
    with tempfile.TemporaryDirectory() as tmp:
        skill_b = bundle(
            agents=[agent("bench", skills=[review.name], scopes=["repo:read"])],
            skills=[review],
            mcp_servers=[server],
        )
        listed_b = bundle(
            agents=[agent("bench", tools=["review.check_quality"])], mcp_servers=[server]
        )
        command_b = bundle(
            agents=[agent("bench", skills=["pack:tools"], commands=["tools/echo"])],
            workspace={"commandPacks": [pack]},
        )
        governed = _stats(
            await _catalog_calls(skill_b, Path(tmp) / "s", calls, review.name, {"diff": diff})
        )
        bare = _stats(
            await _catalog_calls(
                listed_b, Path(tmp) / "l", calls, "review.check_quality", {"diff": diff}
            )
        )
        command = _stats(
            await _catalog_calls(
                command_b, Path(tmp) / "c", max(10, calls // 10), "tools.echo", {"text": "x"}
            )
        )
    return {
        "calls": calls,
        "decision_skill": governed,
        "listed_tool": bare,
        "pipeline_overhead_p50_ms": round(governed["p50_ms"] - bare["p50_ms"], 3),
        "command_call": command,
    }


def print_image(image: dict[str, Any]) -> None:
    """The cold start in the runtime image: its row, its floors, the slowest imports."""
    if "skipped" in image:
        print(f"| in the runtime image | skipped: {image['skipped']} | | | |")
        return
    print(
        f"| in the runtime image, 20 granted skills ({image['runs']} runs) | "
        f"{fmt_spread(image['runner_ms'])} | bare interpreter in the image "
        f"{fmt_spread(image['bare_interpreter_ms'])} | "
        f"ratio {fmt_spread(image['x_bare'], 'x')} | <= {image['target_x']}x |"
    )
    print()
    print(
        f"  in the image, the imports alone (floor: the {image['imports_floor_modules']} "
        f"modules the runner has imported at its first model request, nothing run): "
        f"{fmt_spread(image['imports_floor_ms'])}; runner / imports floor "
        f"{fmt_spread(image['x_imports_floor'], 'x')}; imports floor / bare interpreter "
        f"{fmt_spread(image['imports_floor_x_bare'], 'x')}"
    )
    print("  the runner's slowest imports in the image (-X importtime, cumulative; self):")
    for row in image["top_imports"]:
        print(
            f"    {'  ' * row['depth']}{row['module']}: {row['cumulative_ms']} ms; "
            f"{row['self_ms']} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="cold-start runs (after 1 warm-up)")
    parser.add_argument("--calls", type=int, default=200, help="MCP calls per measurement")
    parser.add_argument("--cold-only", action="store_true", help="only the cold starts")
    parser.add_argument("--json", action="store_true", help="print one JSON document only")
    args = parser.parse_args()

    before = machine()
    report: dict[str, Any] = {
        "machine_before": before,
        "cold_start": cold_start(args.runs, with_mcp=False),
        "cold_start_mcp": cold_start(args.runs, with_mcp=True),
        "cold_start_image": cold_start_image(args.runs),
    }
    if not args.cold_only:
        report["level1_catalog"] = level_one_cost()
        report["mcp_call_overhead"] = asyncio.run(mcp_overhead(args.calls))
        report["skill_pipeline"] = asyncio.run(skill_overhead(args.calls))
    report["machine_after"] = machine()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"Runner benchmarks (machine before: {before})")
    print()
    print("| cold start: process start → first model request | min / median / max "
          "| CPU of the whole run | load average (1 min) | target |")  # fmt: skip
    print("|---|---|---|---|---|")
    for key, title in (
        ("cold_start", "20 granted skills, no MCP server"),
        ("cold_start_mcp", "20 granted skills, 2 MCP servers (stdio + streamable HTTP)"),
    ):
        cs = report[key]
        extra = f"; MCP ready at {cs['mcp_ready_median_ms']} ms" if cs["mcp_servers"] else ""
        print(
            f"| {title} ({cs['runs']} runs{extra}) | {fmt_spread(cs['ms'])} "
            f"| {fmt_spread(cs['cpu_ms'])} | {fmt_spread(cs['loadavg_1m'], '')} "
            f"| < {cs['target_ms']} ms |"
        )
    print_image(report["cold_start_image"])
    if not args.cold_only:
        l1, mo, sp = report["level1_catalog"], report["mcp_call_overhead"], report["skill_pipeline"]
        print()
        print(
            f"  system prompt, {l1['skills']} skills: level 1 {l1['level1_chars']} chars "
            f"(~{l1['level1_tokens_est']} tokens) vs inline {l1['inline_chars']} chars "
            f"(~{l1['inline_tokens_est']} tokens): inline is {l1['ratio_inline_over_level1']}x"
        )
        for transport in ("stdio", "http"):
            m = mo[transport]
            print(
                f"  MCP call ({transport}, {mo['calls']} calls): direct SDK p50 "
                f"{m['direct_sdk']['p50_ms']} ms, via runner p50 {m['runner']['p50_ms']} ms → "
                f"overhead {m['overhead_p50_ms']} ms (mean {m['overhead_mean_ms']} ms)"
            )
        print(
            f"  decision skill (code-quality-review, mcp_tool stdio, {sp['calls']} calls): p50 "
            f"{sp['decision_skill']['p50_ms']} ms vs the listed tool "
            f"{sp['listed_tool']['p50_ms']} ms → pipeline overhead "
            f"{sp['pipeline_overhead_p50_ms']} ms (gate, constraints, outputs schema); "
            f"command-pack call p50 {sp['command_call']['p50_ms']} ms"
        )
    print(f"  machine after: {report['machine_after']}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
