"""Keeping a Run's recording (issue 39's replay mode; :mod:`swarmkit_api.replay`).

When a stage of a Run ends or parks, its result may carry ``recordingSha256``: the runner
printed that stage's tool calls above the read tier, with what each returned, on one stdout
line. Before the verdict is written (while the pod's outcome finalizer still keeps its
log), :func:`settle` reads the line, checks it against the sha256 and appends the calls to
``status.recording`` (:func:`~..builders.recording.recording_fields`), through
:func:`.status.write_fields` like every Run status write. An EvalRun's case built from this
Run replays them (``spec.replay``): the case Run's runner answers those calls from here.
"""

from __future__ import annotations

import logging

from swarmkit_api.replay import recording_from_log

from ..builders import run_status as rs
from ..builders.recording import recording_fields
from . import effects, status
from .model import RunView
from .state import RunState

log = logging.getLogger("swarmkit_operator.runs")


async def settle(st: RunState, run: RunView, verdict: rs.Verdict) -> None:
    """Keep the recording of the stage ``verdict`` reports (see the module docstring)."""
    sha = verdict.result.recording_sha256 if verdict.result is not None else None
    if not sha or sha in (run.status.get("recordedStages") or ()):
        return
    calls = recording_from_log(await effects.stage_log(run, verdict), sha)
    if calls is None:
        log.warning(
            "run %s/%s: the runner reported a recording (sha256 %s) but its line is not in "
            "pod %s's log: it is kept incomplete",
            run.namespace,
            run.name,
            sha[:12],
            verdict.pod_name,
        )
    await status.write_fields(st, run, recording_fields(run.status, sha, calls))
