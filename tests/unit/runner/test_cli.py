"""The runner as the Job runs it: a real ``python -m swarmkit_runner run`` subprocess."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from swarmkit_devcluster.testing import run_with_mounts
from tests.support.bundles import agent, bundle, openai_provider, replay_provider, write_bundle
from tests.support.model_server import ScriptedModelServer, text
from tests.support.runner import run_subprocess, runner_env


def test_success_exit_0_result_in_termination_log_and_audit_on_stdout(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(text("All good."))
    b = bundle(
        agents=[agent("solo", provider="m")],
        providers=[openai_provider("m", model_server.openai_base_url)],
        correlation_id="corr-42",
    )
    out = run_subprocess(write_bundle(b, tmp_path))

    assert out.exit_code == 0, out.stderr
    assert out.result["outcome"] == "Succeeded"
    assert out.result["output"] == "All good."
    assert out.result["steps"] == 1
    # The provider has no prices: the cost is reported unknown, never 0.
    assert out.result["usage"] == {
        "inputTokens": 10,
        "outputTokens": 5,
        "cachedInputTokens": 0,
        "models": [
            {
                "agent": "solo",
                "provider": "m",
                "model": "test-model",
                "inputTokens": 10,
                "cachedInputTokens": 0,
                "outputTokens": 5,
                "costUnknown": True,
            }
        ],
        "costUnknown": True,
    }
    # Every stdout line is a JSON audit event with the run id and correlation id.
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    assert lines and all(json.loads(ln)["run_id"] == b.run.uid for ln in lines)
    assert {e["correlation_id"] for e in out.audit} == {"corr-42"}
    assert out.audit[0]["event"] == "run.start"
    assert out.audit[-1]["event"] == "run.end"
    assert out.audit[-1]["outcome"] == "Succeeded"


def test_bad_bundle_exits_2_with_one_line_reason(tmp_path: Path) -> None:
    layout = write_bundle(bundle(agents=[agent("solo", provider="m")]), tmp_path)
    data = json.loads((layout.bundle_dir / "bundle.json").read_text())
    data["governance"]["maxStepsPerRun"] = "many"
    (layout.bundle_dir / "bundle.json").write_text(json.dumps(data))

    out = run_subprocess(layout)

    assert out.exit_code == 2
    assert out.result["outcome"] == "ValidationFailed"
    assert "governance.maxStepsPerRun" in out.result["message"]
    assert "\n" not in out.result["message"]


def test_missing_bundle_and_broken_json_exit_2(tmp_path: Path) -> None:
    layout = write_bundle(bundle(agents=[agent("solo")]), tmp_path)
    (layout.bundle_dir / "bundle.json").write_text("{not json")
    out = run_subprocess(layout)
    assert (out.exit_code, out.result["outcome"]) == (2, "ValidationFailed")
    assert "not valid JSON" in out.result["message"]

    (layout.bundle_dir / "bundle.json").unlink()
    out = run_subprocess(layout)
    assert out.exit_code == 2
    assert out.result["message"].startswith("bundle not found")


def test_a_bundle_other_than_the_one_the_job_names_is_refused(tmp_path: Path) -> None:
    """The Job carries the sha256 of the bundle.json the operator wrote; a ConfigMap
    re-created under that name by someone else is never run (issue 46)."""
    b = bundle(agents=[agent("solo", replay=[{"text": "the operator's"}])])
    layout = write_bundle(b, tmp_path)
    path = layout.bundle_dir / "bundle.json"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    ok = run_subprocess(layout, {"SWARMKIT_BUNDLE_SHA256": digest})
    assert (ok.exit_code, ok.result["output"]) == (0, "the operator's"), ok.stderr

    path.write_text(path.read_text().replace("the operator's", "eve's"))
    out = run_subprocess(layout, {"SWARMKIT_BUNDLE_SHA256": digest})
    assert (out.exit_code, out.result["outcome"]) == (2, "ValidationFailed")
    assert "is not the one the operator wrote" in out.result["message"]
    assert not [e for e in out.audit if e["event"] == "model.call"]


def test_inconsistent_bundle_exits_2_naming_the_problem(tmp_path: Path) -> None:
    b = bundle(agents=[agent("solo", provider="nowhere")], providers=[replay_provider("r")])
    out = run_subprocess(write_bundle(b, tmp_path))
    assert out.exit_code == 2
    assert out.result["message"] == ("agent solo: model provider 'nowhere' is not in the workspace")


def test_web_search_without_search_provider_is_a_startup_error(tmp_path: Path) -> None:
    b = bundle(
        agents=[agent("solo", native={"webSearch": True}, replay=[{"text": "x"}])],
        providers=[replay_provider()],
    )
    out = run_subprocess(write_bundle(b, tmp_path))
    assert out.exit_code == 2
    assert "web_search" in out.result["message"]
    assert "searchProvider" in out.result["message"]


def test_failed_run_exits_1(tmp_path: Path) -> None:
    with ScriptedModelServer(api_key="the-right-key") as server:
        b = bundle(
            agents=[agent("solo", provider="m")],
            providers=[openai_provider("m", server.openai_base_url)],
        )
        out = run_subprocess(write_bundle(b, tmp_path))
    assert out.exit_code == 1
    assert out.result["outcome"] == "Failed"
    assert "HTTP 401" in out.result["message"]


def test_default_paths_are_the_job_mount_points(tmp_path: Path) -> None:
    """In its pod the runner finds everything at the operator's mount points, with no path
    prefix: here the bundle, scratch and termination log are bind-mounted there in a private
    mount namespace, as the process node (and a kubelet) does."""
    b = bundle(agents=[agent("solo", replay=[{"text": "from the mount points"}])])
    layout = write_bundle(b, tmp_path / "stage")
    result_file = tmp_path / "termination-log"
    result_file.touch()
    mounts = {
        str(layout.bundle_dir): "/etc/swarmkit/bundle",
        str(layout.scratch): "/scratch",
        str(result_file): "/dev/termination-log",
    }
    for args in ([], ["--bundle", "/etc/swarmkit/bundle"]):  # every default; the Job's args
        work = tmp_path / f"ns{len(args)}"
        work.mkdir()
        proc = run_with_mounts(
            [sys.executable, "-m", "swarmkit_runner", "run", *args],
            mounts,
            work_dir=work,
            env=runner_env({}),
        )
        assert proc.returncode == 0, proc.stderr
        assert "SWARMKIT_PATH_PREFIX" not in runner_env({})
        assert json.loads(result_file.read_text())["output"] == "from the mount points"
        result_file.write_text("")


def test_sigterm_cancels_the_run_and_reports_cancelled(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(text("too late", delay=30))
    b = bundle(
        agents=[agent("solo", provider="m")],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    layout = write_bundle(b, tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "swarmkit_runner", "run", *layout.cli_args()],
        env=runner_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while not model_server.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    assert model_server.requests, "the runner never called the model"
    started = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=20)

    assert time.monotonic() - started < 10
    assert proc.returncode == 1
    result = json.loads(layout.termination_log.read_text())
    assert result["outcome"] == "Cancelled"


def test_a_secret_never_read_is_scrubbed_and_a_short_one_is_named(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    never_read = "sk-cli-never-read-" + os.urandom(6).hex()
    model_server.push(text(f"the key is {never_read}"))
    b = bundle(
        agents=[agent("solo", provider="m")],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    b = b.model_copy(update={"run": b.run.model_copy(update={"input": f"use {never_read}"})})
    env = {"SWARMKIT_SECRET_UNUSED_TOKEN": never_read, "SWARMKIT_SECRET_PIN": "4321"}
    out = run_subprocess(write_bundle(b, tmp_path), env=env)
    assert out.result["output"] == "the key is [REDACTED]"
    assert never_read not in out.stdout + out.stderr + json.dumps(out.result)
    [warning] = [e for e in out.audit if e["event"] == "startup.warning"]
    assert warning["variable"] == "SWARMKIT_SECRET_PIN" and "4321" not in json.dumps(warning)
