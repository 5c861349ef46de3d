"""``swarmkit_runner serve``: a served topology (real subprocess) against the public a2a-sdk
client and against our own runner's remote agent skill."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError, ClientConfig, create_client
from a2a.client.client_factory import ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)

from swarmkit_api.bundle import secret_env_name
from tests.support.bundles import (
    BundleLayout,
    agent,
    bundle,
    openai_provider,
    replay_provider,
    secret_ref,
    skill,
    topology_of,
    write_bundle,
)
from tests.support.model_server import Reply, ScriptedModelServer, text, tool_call
from tests.support.runner import run_in_process
from tests.support.served import ServedRunner

TOKEN = "served-token-0123"
ANSWER = "the served answer is 42"


def served_layout(tmp_path: Path, provider: Any, root: Any, *skills: Any) -> BundleLayout:
    b = bundle(
        agents=[root],
        skills=list(skills),
        providers=[provider],
        topology=topology_of("oracle", root.name, description="Answers questions about 42."),
    )
    return write_bundle(b, tmp_path / "served")


@pytest.fixture
def replay_served(tmp_path: Path) -> Iterator[ServedRunner]:
    root = agent("answerer", provider="replay", replay=[{"text": ANSWER}])
    with ServedRunner(served_layout(tmp_path, replay_provider(), root), tokens=[TOKEN]) as served:
        yield served


def user_message(text_: str, task_id: str = "", context_id: str = "") -> SendMessageRequest:
    msg = Message(message_id=f"m-{time.monotonic_ns()}", role=Role.ROLE_USER)
    msg.parts.append(Part(text=text_))
    if task_id:
        msg.task_id = task_id
    if context_id:
        msg.context_id = context_id
    return SendMessageRequest(message=msg)


async def sdk_client(served: ServedRunner, token: str = TOKEN, streaming: bool = False) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.AsyncClient(headers=headers, timeout=60)
    return await create_client(
        served.base_url, ClientConfig(streaming=streaming, httpx_client=http)
    )


async def collect(events: AsyncIterator[Any]) -> list[Any]:
    return [e async for e in events]


async def test_card_lists_the_topology_and_a_wrong_token_runs_nothing(
    replay_served: ServedRunner,
) -> None:
    card = httpx.get(replay_served.card_url).json()
    assert card["name"] == "oracle"
    [skill_] = card["skills"]
    assert (skill_["id"], skill_["description"]) == ("oracle", "Answers questions about 42.")
    assert card["supportedInterfaces"][0]["url"] == f"{replay_served.base_url}/a2a"
    assert card["capabilities"]["streaming"] is True

    for token in ("wrong-token", ""):
        client = await sdk_client(replay_served, token=token)
        with pytest.raises(A2AClientError, match="HTTP Error 401"):
            await collect(client.send_message(user_message("what?")))
    raw = httpx.post(
        f"{replay_served.base_url}/a2a",
        json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}},
    )
    assert raw.status_code == 401 and raw.headers["www-authenticate"].startswith("Bearer")
    assert not replay_served.events("run.start")  # nothing ran
    assert 'swarmkit_serve_rejected_total{reason="unauthorized"} 3' in replay_served.metrics()


async def test_send_get_and_stream_with_the_sdk_client(replay_served: ServedRunner) -> None:
    client = await sdk_client(replay_served)
    [event] = await collect(client.send_message(user_message("what?", context_id="ctx-42")))
    task = event.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text == ANSWER
    got = await client.get_task(GetTaskRequest(id=task.id))
    assert got.status.state == TaskState.TASK_STATE_COMPLETED and got.context_id == "ctx-42"

    streaming = await sdk_client(replay_served, streaming=True)
    events = await collect(streaming.send_message(user_message("and again?")))
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task" and kinds[-1] == "status_update"
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    artifacts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert artifacts[0].parts[0].text == ANSWER

    # Each task ran the topology like a Run, with the caller's contextId as correlation id.
    starts = replay_served.events_after("run.start", 2)
    assert len(starts) == 2 and starts[0]["target"] == "oracle"
    assert starts[0]["correlation_id"] == "ctx-42" and starts[0]["run_id"] == task.id
    metrics = replay_served.metrics()
    assert 'swarmkit_serve_tasks_total{outcome="completed"} 2' in metrics
    assert "swarmkit_serve_task_duration_seconds_count 2" in metrics
    assert "swarmkit_serve_active_tasks 0" in metrics


async def test_cancel_a_running_task_and_429_past_the_limit(tmp_path: Path) -> None:
    with ScriptedModelServer(default=Reply(text="late", delay=30.0)) as model:
        root = agent("answerer", provider="m")
        layout = served_layout(tmp_path, openai_provider("m", model.openai_base_url), root)
        with ServedRunner(layout, tokens=[TOKEN], max_concurrent=1) as served:
            client = await sdk_client(served)
            req = user_message("slow one")
            req.configuration.return_immediately = True
            [event] = await collect(client.send_message(req))
            task_id = event.task.id
            assert event.task.status.state in (
                TaskState.TASK_STATE_SUBMITTED,
                TaskState.TASK_STATE_WORKING,
            )
            busy = httpx.post(
                f"{served.base_url}/a2a",
                headers={"Authorization": f"Bearer {TOKEN}"},
                json={
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "message/send",
                    "params": {"message": {"role": "user", "parts": [{"text": "another"}]}},
                },
            )
            assert busy.status_code == 429 and busy.headers["retry-after"] == "1"
            cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
            [end] = served.events_after("run.end", 1)
            assert end["outcome"] == "Cancelled" and end["run_id"] == task_id
            assert len(served.events("run.start")) == 1  # the refused one never started


async def test_input_required_answered_by_a_second_message(tmp_path: Path) -> None:
    """A skill escalating to a human asks the caller instead; the answer resumes the run."""

    def echo(request: Any) -> Reply:
        [(result, _error)] = request.tool_results()
        return text("decided: " + json.loads(result)["answer"])

    with ScriptedModelServer([tool_call("deploy-check", input="may I deploy?"), echo]) as model:
        gate = skill(
            "deploy-check",
            implementation={"type": "agent", "cardUrl": "http://127.0.0.1:9/card.json"},
            constraints={"onFailure": "escalate_to_human"},
        )
        root = agent("answerer", provider="m", skills=["deploy-check"])
        layout = served_layout(tmp_path, openai_provider("m", model.openai_base_url), root, gate)
        with ServedRunner(layout, tokens=[TOKEN]) as served:
            client = await sdk_client(served)
            [event] = await collect(client.send_message(user_message("deploy v2")))
            task = event.task
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            question = task.status.message.parts[0].text
            assert "deploy-check" in question and "Decide how the run should go on" in question
            [event] = await collect(
                client.send_message(user_message("yes, ship it", task_id=task.id))
            )
            done = event.task
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            assert done.artifacts[0].parts[0].text == "decided: yes, ship it"
            [asked] = served.events_after("executor.input_request", 1)
            [answered] = served.events_after("executor.input_response", 1)
            assert asked["skill"] == "deploy-check" and answered["answer"] == "yes, ship it"
            assert not served.events("review.requested")  # not parked: asked and resumed


async def test_our_runner_calls_the_served_topology_over_0_3_and_1_0(
    tmp_path: Path, replay_served: ServedRunner
) -> None:
    """A Run's remote agent skill (cardUrl) gets the served answer; audits join."""
    ref = secret_ref("peer", "token")
    uid = "00000000-0000-4000-8000-0000000005e1"
    with ScriptedModelServer(
        [tool_call("oracle", input="what is the answer?"), lambda r: text(r.tool_results()[0][0])]
    ) as model:
        caller = bundle(
            agents=[agent("asker", provider="m", skills=["oracle"])],
            skills=[
                skill(
                    "oracle",
                    implementation={
                        "type": "agent",
                        "cardUrl": replay_served.card_url,
                        "credentialsRef": "peer",
                    },
                    category="coordination",
                )
            ],
            providers=[openai_provider("m", model.openai_base_url)],
            workspace={
                "credentials": [
                    {"name": "peer", "secretKeyRef": ref.wire(), "allowedHosts": ["127.0.0.1"]}
                ]
            },
            uid=uid,
        )
        out = await run_in_process(
            caller, write_bundle(caller, tmp_path / "caller"), {secret_env_name(ref): TOKEN}
        )
    assert out.outcome == "Succeeded", out.result
    assert out.result["output"] == ANSWER
    [sent] = out.events("a2a.send")
    replay_served.events_after("run.start", 1)
    [served_start] = [
        e for e in replay_served.events("run.start") if e["run_id"] == sent["task_id"]
    ]
    assert served_start["correlation_id"] == uid == out.events("run.start")[0]["correlation_id"]


async def test_sdk_0_3_dialect(replay_served: ServedRunner) -> None:
    """An a2a-sdk client speaking A2A 0.3 (legacy card) to the same endpoint."""
    card = httpx.get(replay_served.card_url).json()
    legacy = {k: v for k, v in card.items() if k != "supportedInterfaces"}
    from a2a.client.card_resolver import parse_agent_card

    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(
        parse_agent_card(legacy)
    )
    [event] = await collect(client.send_message(user_message("old client")))
    assert event.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert event.task.artifacts[0].parts[0].text == ANSWER


async def test_sigterm_drains_running_tasks(tmp_path: Path) -> None:
    """A task running when the pod is told to stop finishes; a new one is refused (503)."""
    with ScriptedModelServer(default=Reply(text="finished while draining", delay=2.0)) as model:
        root = agent("answerer", provider="m")
        layout = served_layout(tmp_path, openai_provider("m", model.openai_base_url), root)
        with ServedRunner(layout, tokens=[TOKEN], drain_seconds=20) as served:
            client = await sdk_client(served)
            sending = asyncio.ensure_future(collect(client.send_message(user_message("go"))))
            deadline = time.monotonic() + 30
            while not served.events("run.start") and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            served.terminate()
            await asyncio.sleep(0.3)
            assert httpx.get(f"{served.base_url}/readyz").status_code == 503
            refused = httpx.post(
                f"{served.base_url}/a2a",
                headers={"Authorization": f"Bearer {TOKEN}"},
                json={
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "message/send",
                    "params": {"message": {"role": "user", "parts": [{"text": "late"}]}},
                },
            )
            assert refused.status_code == 503 and "retry-after" in refused.headers
            [event] = await sending
            assert event.task.status.state == TaskState.TASK_STATE_COMPLETED
            assert event.task.artifacts[0].parts[0].text == "finished while draining"
            assert served.wait(timeout=30) == 0
            assert "drained: 1 finished, 0 cancelled" in served.stderr()
