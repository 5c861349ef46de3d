"""A Run with ``spec.readOnly`` (an EvalRun's replayed cases): the runner refuses every tool
call that does not only read, so an evaluation never writes what a production Run would."""

from __future__ import annotations

from pathlib import Path

from tests.support.bundles import agent, bundle, openai_provider, write_bundle
from tests.support.model_server import ScriptedModelServer, text, tool_call
from tests.support.runner import run_in_process


async def _run(tmp_path: Path, model_server: ScriptedModelServer, read_only: bool):  # type: ignore[no-untyped-def]
    model_server.push(
        tool_call("file_io", operation="write", path="notes/a.txt", content="written"),
        text("done"),
    )
    b = bundle(
        agents=[agent("solo", provider="m", native={"file_io": True})],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    b = b.model_copy(update={"run": b.run.model_copy(update={"read_only": read_only})})
    layout = write_bundle(b, tmp_path)
    return await run_in_process(b, layout), layout


async def test_a_read_only_run_refuses_writes(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    out, layout = await _run(tmp_path, model_server, read_only=True)
    assert out.outcome == "Succeeded"
    [refused] = out.events("tool.refused")
    assert refused["tool"] == "file_io"
    [(content, is_error)] = model_server.requests[1].tool_results()
    assert is_error and "ReviewerReadOnly" in content and "spec.readOnly" in content
    assert not (layout.scratch / "work" / "notes" / "a.txt").exists()


async def test_the_same_run_without_it_writes(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    out, layout = await _run(tmp_path, model_server, read_only=False)
    assert out.outcome == "Succeeded"
    assert not [r for r in out.events("tool.refused") if r["tool"] == "file_io"]
    assert (layout.scratch / "work" / "notes" / "a.txt").read_text() == "written"
