"""Valid manifest factories and the invalid-manifest corpus.

Each invalid case is a valid manifest with one thing broken, and the field path both the
pydantic models and the apiserver must report for it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

API = "swarmkit.dev/v1alpha1"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_manifests() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def skill(name: str = "my-skill", **spec: Any) -> dict[str, Any]:
    body = {
        "description": "Use when testing.",
        "category": "capability",
        "provenance": {"authoredBy": "human", "version": "1.0.0"},
    }
    body.update(spec)
    return {"apiVersion": API, "kind": "Skill", "metadata": {"name": name}, "spec": body}


def workspace(name: str = "default", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Workspace", "metadata": {"name": name}, "spec": spec}


def agent(name: str = "my-agent", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Agent", "metadata": {"name": name}, "spec": spec}


def topology(name: str = "my-topology", agents: Any = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "workspaceRef": {"name": "default"},
        "agents": agents
        if agents is not None
        else [
            {"name": "lead", "agentRef": {"name": "a"}, "role": "root"},
            {"name": "helper", "agentRef": {"name": "b"}, "role": "worker", "parent": "lead"},
        ],
    }
    body.update(spec)
    return {"apiVersion": API, "kind": "Topology", "metadata": {"name": name}, "spec": body}


def quota(name: str = "q", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"cost": "10", "currency": "USD", "window": "daily"}
    body.update(spec)
    body = {k: v for k, v in body.items() if v is not None}
    return {"apiVersion": API, "kind": "SpendQuota", "metadata": {"name": name}, "spec": body}


def priced(name: str, currency: str) -> dict[str, Any]:
    prices = {"currency": currency, "input": "3", "output": "15"}
    return {"name": name, "type": "replay", "prices": prices}


def run(name: str = "my-run", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"topologyRef": {"name": "t"}}
    body.update(spec)
    return {"apiVersion": API, "kind": "Run", "metadata": {"name": name}, "spec": body}


def review(name: str = "my-run-1", **decision: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "request": {"kind": "escalation", "question": "Go on?", "runRef": {"name": "my-run"}},
    }
    if decision:
        body["decision"] = decision
    return {"apiVersion": API, "kind": "Review", "metadata": {"name": name}, "spec": body}


def mailbox_message(name: str = "my-run-0000-fx0", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "mailbox": "ops",
        "message": "disk full",
        "sender": {"agent": "watcher", "run": "my-run"},
        "workspace": "default",
        **spec,
    }
    return {"apiVersion": API, "kind": "MailboxMessage", "metadata": {"name": name}, "spec": body}


def funnel(name: str = "my-funnel", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "judge": {"skill": "quality-judge"},
        "approve": {
            "rules": [{"roles": ["leads"], "kOf": 2}],
            "roles": {"leads": {"groups": ["release-leads"]}},
        },
    }
    body.update(spec)
    return {"apiVersion": API, "kind": "Funnel", "metadata": {"name": name}, "spec": body}


CASE = {"name": "c1", "input": "x", "grader": {"type": "contains", "expected": "y"}}


def evalset(name: str = "my-cases", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"cases": [CASE], **spec}
    return {"apiVersion": API, "kind": "EvalSet", "metadata": {"name": name}, "spec": body}


def evalrun(name: str = "my-eval", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "evalSetRef": {"name": "my-cases"},
        "candidate": {"agentRef": {"name": "my-agent"}},
        **spec,
    }
    return {"apiVersion": API, "kind": "EvalRun", "metadata": {"name": name}, "spec": body}


def without(doc: dict[str, Any], *path: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out


@dataclass(frozen=True)
class Invalid:
    name: str
    path: str
    manifest: dict[str, Any]


STDIO = {"id": "files", "transport": "stdio", "command": ["mcp-files"]}
HTTP_TOOL = {"name": "kb_search", "description": "Search.", "http": {"url": "https://kb/x"}}
GW_TOKEN = {"name": "ci", "secretKeyRef": {"name": "gateway-tokens", "key": "ci"}}
REASONING = {"type": "object", "properties": {"reasoning": {"type": "string"}}}

INVALID: tuple[Invalid, ...] = (
    Invalid("skill-name-not-kebab", "metadata.name", skill(name="Bad_Name")),
    Invalid(
        "skill-missing-description", "spec.description", without(skill(), "spec", "description")
    ),
    Invalid("skill-bad-category", "spec.category", skill(category="magic")),
    Invalid("skill-missing-provenance", "spec.provenance", without(skill(), "spec", "provenance")),
    Invalid(
        "skill-bad-authored-by",
        "spec.provenance.authoredBy",
        skill(provenance={"authoredBy": "robot", "version": "1"}),
    ),
    Invalid("skill-decision-without-outputs", "spec.outputs", skill(category="decision")),
    Invalid(
        "skill-decision-without-reasoning",
        "spec.outputs",
        skill(category="decision", outputs={"type": "object", "properties": {"verdict": {}}}),
    ),
    Invalid("skill-impl-bad-type", "spec.implementation.type", skill(implementation={"type": "x"})),
    Invalid(
        "skill-mcp-tool-without-tool",
        "spec.implementation.server",
        skill(implementation={"type": "mcp_tool", "server": "gh"}),
    ),
    Invalid(
        "skill-agent-topology-and-card",
        "spec.implementation.topology",
        skill(
            implementation={
                "type": "agent",
                "topology": "research",
                "cardUrl": "https://r.example/.well-known/agent-card.json",
            }
        ),
    ),
    Invalid(
        "skill-agent-neither-topology-nor-card",
        "spec.implementation.topology",
        skill(implementation={"type": "agent"}),
    ),
    Invalid(
        "skill-agent-bad-on-unanswerable",
        "spec.implementation.onUnanswerable",
        skill(implementation={"type": "agent", "topology": "t", "onUnanswerable": "ignore"}),
    ),
    Invalid(
        "skill-agent-card-url-not-http",
        "spec.implementation.cardUrl",
        skill(implementation={"type": "agent", "cardUrl": "ftp://x/card.json"}),
    ),
    Invalid(
        "skill-skill-id-without-card",
        "spec.implementation.skillId",
        skill(implementation={"type": "agent", "topology": "t", "skillId": "s"}),
    ),
    Invalid(
        "skill-composed-empty",
        "spec.implementation.composes",
        skill(implementation={"type": "composed", "composes": []}),
    ),
    Invalid(
        "skill-command-without-pack",
        "spec.implementation.pack",
        skill(implementation={"type": "command", "command": "ls"}),
    ),
    Invalid(
        "skill-llm-prompt-without-prompt",
        "spec.implementation.prompt",
        skill(implementation={"type": "llm_prompt"}),
    ),
    Invalid(
        "skill-file-absolute-path",
        "spec.files[0].path",
        skill(files=[{"path": "/etc/passwd", "content": "x"}]),
    ),
    Invalid(
        "skill-file-dotdot-path",
        "spec.files[0].path",
        skill(files=[{"path": "../../escape.sh", "content": "x"}]),
    ),
    Invalid(
        "skill-file-content-and-configmap",
        "spec.files[0]",
        skill(files=[{"path": "a.md", "content": "x", "configMapRef": {"name": "c", "key": "k"}}]),
    ),
    Invalid(
        "skill-file-duplicate-paths",
        "spec.files",
        skill(files=[{"path": "a.md", "content": "x"}, {"path": "a.md", "content": "y"}]),
    ),
    Invalid(
        "skill-retry-bad-backoff",
        "spec.constraints.retry.backoff",
        skill(constraints={"retry": {"attempts": 1, "backoff": "random"}}),
    ),
    Invalid(
        "skill-retry-negative-attempts",
        "spec.constraints.retry.attempts",
        skill(constraints={"retry": {"attempts": -1}}),
    ),
    Invalid("skill-unknown-field", "spec.colour", skill(colour="blue")),
    Invalid(
        "tool-endpoint-rejected",
        "spec.tools[0].endpoint",
        workspace(tools=[{**HTTP_TOOL, "endpoint": "https://kb/x"}]),
    ),
    Invalid(
        "tool-type-rejected",
        "spec.tools[0].type",
        workspace(tools=[{**HTTP_TOOL, "type": "http"}]),
    ),
    Invalid(
        "tool-http-without-url",
        "spec.tools[0].http",
        workspace(tools=[{"name": "kb_search", "description": "Search."}]),
    ),
    Invalid(
        "mcp-stdio-without-command",
        "spec.mcpServers[0].command",
        workspace(mcpServers=[{"id": "files", "transport": "stdio"}]),
    ),
    Invalid(
        "mcp-http-without-url",
        "spec.mcpServers[0].url",
        workspace(mcpServers=[{"id": "pg", "transport": "http"}]),
    ),
    Invalid(
        "mcp-bad-transport",
        "spec.mcpServers[0].transport",
        workspace(mcpServers=[{**STDIO, "transport": "sse"}]),
    ),
    Invalid(
        "mcp-bad-permission-tier",
        "spec.mcpServers[0].permission",
        workspace(mcpServers=[{**STDIO, "permission": "lenient"}]),
    ),
    Invalid(
        "mcp-env-value-and-secret",
        "spec.mcpServers[0].env[0]",
        workspace(
            mcpServers=[
                {
                    **STDIO,
                    "env": [
                        {"name": "TOKEN", "value": "x", "secretKeyRef": {"name": "s", "key": "k"}}
                    ],
                }
            ]
        ),
    ),
    Invalid(
        "mcp-duplicate-ids",
        "spec.mcpServers",
        workspace(mcpServers=[STDIO, STDIO]),
    ),
    Invalid(
        "pack-id-workspace-reserved",
        "spec.commandPacks[0].id",
        workspace(
            commandPacks=[
                {
                    "id": "workspace",
                    "commands": [{"name": "ls", "description": "List.", "argv": ["ls"]}],
                }
            ]
        ),
    ),
    Invalid(
        "provider-bad-type",
        "spec.modelProviders[0].type",
        workspace(modelProviders=[{"name": "m", "type": "cohere"}]),
    ),
    Invalid("agent-bad-grant", "spec.skills[0]", agent(skills=["Not A Skill"])),
    Invalid("agent-duplicate-grant", "spec.skills", agent(skills=["code-review", "code-review"])),
    Invalid(
        "agent-temperature-too-high", "spec.model.temperature", agent(model={"temperature": 3})
    ),
    Invalid(
        "agent-temperature-on-reasoning-model",
        "spec.model.temperature",
        agent(model={"name": "o3-mini", "temperature": 0.2}),
    ),
    Invalid(
        "agent-temperature-too-high-for-claude",
        "spec.model.temperature",
        agent(model={"name": "anthropic/claude-sonnet-4-6", "temperature": 1.5}),
    ),
    Invalid(
        "agent-max-continuations-too-high",
        "spec.model.maxContinuations",
        agent(model={"maxContinuations": 11}),
    ),
    Invalid(
        "provider-max-tokens-parameter-not-openai",
        "spec.modelProviders[0].maxTokensParameter",
        workspace(
            modelProviders=[{"name": "m", "type": "anthropic", "maxTokensParameter": "max_tokens"}]
        ),
    ),
    Invalid(
        "provider-bad-streaming",
        "spec.modelProviders[0].streaming",
        workspace(modelProviders=[{"name": "m", "type": "openai", "streaming": "sometimes"}]),
    ),
    Invalid("agent-empty-replay-turn", "spec.replay[0]", agent(replay=[{}])),
    Invalid("agent-gateway-without-auth", "spec.gateway.auth", agent(gateway={"enabled": True})),
    Invalid(
        "agent-gateway-no-tokens",
        "spec.gateway.auth.tokens",
        agent(gateway={"enabled": True, "auth": {"tokens": []}}),
    ),
    Invalid(
        "agent-gateway-duplicate-token-names",
        "spec.gateway.auth.tokens",
        agent(gateway={"enabled": True, "auth": {"tokens": [GW_TOKEN, GW_TOKEN]}}),
    ),
    Invalid(
        "agent-gateway-token-name-not-kebab",
        "spec.gateway.auth.tokens[0].name",
        agent(gateway={"auth": {"tokens": [{**GW_TOKEN, "name": "CI Bot"}]}}),
    ),
    Invalid(
        "agent-gateway-token-without-secret",
        "spec.gateway.auth.tokens[0].secretKeyRef",
        agent(gateway={"auth": {"tokens": [{"name": "ci"}]}}),
    ),
    Invalid("agent-gateway-privileged-port", "spec.gateway.port", agent(gateway={"port": 80})),
    Invalid(
        "agent-gateway-negative-replicas", "spec.gateway.replicas", agent(gateway={"replicas": -1})
    ),
    Invalid(
        "topology-two-roots",
        "spec.agents",
        topology(
            agents=[
                {"name": "a", "agentRef": {"name": "a"}, "role": "root"},
                {"name": "b", "agentRef": {"name": "b"}, "role": "root"},
            ]
        ),
    ),
    Invalid(
        "topology-worker-without-parent",
        "spec.agents[1].parent",
        topology(
            agents=[
                {"name": "a", "agentRef": {"name": "a"}, "role": "root"},
                {"name": "b", "agentRef": {"name": "b"}, "role": "worker"},
            ]
        ),
    ),
    Invalid(
        "topology-unknown-parent",
        "spec.agents",
        topology(
            agents=[
                {"name": "a", "agentRef": {"name": "a"}, "role": "root"},
                {"name": "b", "agentRef": {"name": "b"}, "role": "worker", "parent": "zz"},
            ]
        ),
    ),
    Invalid(
        "topology-bad-role",
        "spec.agents[0].role",
        topology(agents=[{"name": "a", "agentRef": {"name": "a"}, "role": "boss"}]),
    ),
    Invalid(
        "topology-missing-workspace",
        "spec.workspaceRef",
        without(topology(), "spec", "workspaceRef"),
    ),
    Invalid("topology-no-agents", "spec.agents", topology(agents=[])),
    Invalid(
        "topology-unknown-harness-kind",
        "spec.agents[0].harness.kind",
        topology(
            agents=[
                {
                    "name": "a",
                    "agentRef": {"name": "a"},
                    "role": "root",
                    "harness": {"kind": "opencode"},
                },
            ]
        ),
    ),
    Invalid(
        "topology-harness-node-with-children",
        "spec.agents",
        topology(
            agents=[
                {
                    "name": "a",
                    "agentRef": {"name": "a"},
                    "role": "root",
                    "harness": {"kind": "claude-code"},
                },
                {"name": "b", "agentRef": {"name": "b"}, "role": "worker", "parent": "a"},
            ]
        ),
    ),
    Invalid(
        "topology-harness-unknown-capability",
        "spec.agents[0].harness.requires[0]",
        topology(
            agents=[
                {
                    "name": "a",
                    "agentRef": {"name": "a"},
                    "role": "root",
                    "harness": {"kind": "claude-code", "requires": ["telepathy"]},
                },
            ]
        ),
    ),
    Invalid(
        "topology-served-without-description",
        "spec.description",
        topology(serve={"auth": {"bearerTokens": [{"name": "t", "key": "k"}]}}),
    ),
    Invalid(
        "topology-serve-without-auth",
        "spec.serve.auth",
        topology(description="d", serve={"replicas": 1}),
    ),
    Invalid(
        "topology-serve-no-tokens",
        "spec.serve.auth.bearerTokens",
        topology(description="d", serve={"auth": {"bearerTokens": []}}),
    ),
    Invalid(
        "topology-serve-duplicate-token",
        "spec.serve.auth.bearerTokens",
        topology(
            description="d",
            serve={
                "auth": {"bearerTokens": [{"name": "t", "key": "k"}, {"name": "t", "key": "k"}]}
            },
        ),
    ),
    Invalid(
        "topology-serve-drain-longer-than-tasks",
        "spec.serve.drainSeconds",
        topology(
            description="d",
            serve={
                "auth": {"bearerTokens": [{"name": "t", "key": "k"}]},
                "taskTimeoutSeconds": 30,
                "drainSeconds": 600,
            },
        ),
    ),
    Invalid(
        "topology-serve-zero-concurrency",
        "spec.serve.maxConcurrentTasks",
        topology(
            description="d",
            serve={"auth": {"bearerTokens": [{"name": "t", "key": "k"}]}, "maxConcurrentTasks": 0},
        ),
    ),
    Invalid(
        "run-topology-and-agent",
        "spec.topologyRef",
        run(agentRef={"name": "a"}),
    ),
    Invalid("run-no-target", "spec.topologyRef", without(run(), "spec", "topologyRef")),
    Invalid("run-zero-timeout", "spec.timeoutSeconds", run(timeoutSeconds=0)),
    Invalid(
        "review-answer-without-text",
        "spec.decision.text",
        review(verdict="answer", decidedBy="alice"),
    ),
    Invalid(
        "review-unknown-verdict",
        "spec.decision.verdict",
        review(verdict="maybe", decidedBy="alice"),
    ),
    Invalid(
        "review-decision-without-decider",
        "spec.decision.decidedBy",
        review(verdict="approve"),
    ),
    Invalid(
        "review-unknown-kind",
        "spec.request.kind",
        {**review(), "spec": {"request": {"kind": "gossip", "question": "?"}}},
    ),
    Invalid(
        "mailbox-message-bad-mailbox-name",
        "spec.mailbox",
        mailbox_message(mailbox="Ops Team"),
    ),
    Invalid(
        "mailbox-message-acknowledged-by-nobody",
        "spec.acknowledgement.by",
        mailbox_message(acknowledgement={"by": ""}),
    ),
    Invalid(
        "funnel-empty-rules",
        "spec.approve.rules",
        funnel(approve={"rules": [], "roles": {"leads": {"groups": ["release-leads"]}}}),
    ),
    Invalid(
        "funnel-threshold-above-one",
        "spec.judge.threshold",
        funnel(judge={"skill": "j", "threshold": 1.5}),
    ),
    Invalid(
        "funnel-quorum-and-kof",
        "spec.approve.rules[0].quorum",
        funnel(
            approve={
                "rules": [{"roles": ["leads"], "quorum": "all", "kOf": 2}],
                "roles": {"leads": {"groups": ["release-leads"]}},
            }
        ),
    ),
    Invalid(
        "funnel-rule-names-undefined-role",
        "spec.approve.rules",
        funnel(
            approve={
                "rules": [{"roles": ["ghosts"], "quorum": "any"}],
                "roles": {"leads": {"groups": ["release-leads"]}},
            }
        ),
    ),
    Invalid(
        "funnel-bad-route-back",
        "spec.review.routeBackAt",
        funnel(review={"agent": "critic", "routeBackAt": "urgent"}),
    ),
    Invalid("funnel-no-approve", "spec.approve", without(funnel(), "spec", "approve")),
    Invalid("quota-negative-cost", "spec.cost", quota(cost="-1")),
    Invalid("quota-negative-tokens", "spec.tokens", quota(tokens=-5)),
    Invalid("quota-no-limit", "spec", quota(cost=None, currency=None)),
    Invalid("quota-cost-without-currency", "spec.currency", quota(currency=None)),
    Invalid("quota-lowercase-currency", "spec.currency", quota(currency="usd")),
    Invalid("quota-unknown-window", "spec.window", quota(window="weekly")),
    Invalid("quota-rolling-without-hours", "spec.hours", quota(window="rollingHours")),
    Invalid("quota-hours-on-daily", "spec.hours", quota(hours=5)),
    Invalid("quota-zero-hours", "spec.hours", quota(window="rollingHours", hours=0)),
    Invalid("quota-unknown-on-exhausted", "spec.onExhausted", quota(onExhausted="pray")),
    Invalid("quota-warning-over-100", "spec.warningPercent", quota(warningPercent=150)),
    Invalid("run-negative-max-cost", "spec.maxCost", run(maxCost="-0.5")),
    Invalid("run-float-max-cost", "spec.maxCost", run(maxCost="1e3")),
    Invalid("run-zero-max-tokens", "spec.maxTokens", run(maxTokens=0)),
    # Issue 47.7: a JSON Schema's type is one of JSON Schema's seven.
    Invalid(
        "skill-outputs-type-banana",
        "spec.outputs.type",
        skill(outputs={"type": "banana"}),
    ),
    # Issue 47.6: a schedule that could never fire is refused by its shape at admission.
    Invalid(
        "topology-cron-words",
        "spec.schedule.cron",
        topology(schedule={"cron": "every tuesday"}),
    ),
    Invalid(
        "topology-cron-six-fields",
        "spec.schedule.cron",
        topology(schedule={"cron": "0 0 * * * *"}),
    ),
    Invalid(
        "topology-timezone-not-a-zone-name",
        "spec.schedule.timezone",
        topology(schedule={"cron": "0 * * * *", "timezone": "Mars Olympus!"}),
    ),
    # Issue 47: labels are checked at admission, not dropped from the Job and pod in silence.
    Invalid("run-label-bad-key", "spec.labels", run(labels={"bad key!": "x"})),
    Invalid("run-label-bad-value", "spec.labels", run(labels={"team": "a b"})),
    Invalid("run-label-long-value", "spec.labels.team", run(labels={"team": "x" * 64})),
    Invalid("run-label-long-prefix", "spec.labels", run(labels={"a" * 254 + "/x": "y"})),
    Invalid("run-label-reserved", "spec.labels", run(labels={"swarmkit.dev/run": "x"})),
    Invalid("run-label-reserved-sub", "spec.labels", run(labels={"app.kubernetes.io/x": "y"})),
    Invalid("run-too-many-labels", "spec.labels", run(labels={f"l{i}": "x" for i in range(65)})),
    # 131,073 four-byte characters: inside the character limit, over the 512 KiB of UTF-8.
    Invalid("run-input-over-bytes", "spec.input", run(input="\U0001f600" * 131073)),
    Invalid("run-input-over-chars", "spec.input", run(input="a" * 262145)),
    Invalid(
        "quota-selector-bad-key",
        "spec.selector.matchLabels",
        quota(selector={"matchLabels": {"bad key!": "x"}}),
    ),
    Invalid(
        "quota-selector-bad-value",
        "spec.selector.matchLabels",
        quota(selector={"matchLabels": {"team": "-x"}}),
    ),
    Invalid(
        "evalset-exact-without-expected",
        "spec.cases[0].grader.expected",
        evalset(cases=[{**CASE, "grader": {"type": "exact"}}]),
    ),
    Invalid("evalset-duplicate-case-names", "spec.cases", evalset(cases=[CASE, CASE])),
    Invalid(
        "evalset-assertion-two-checks",
        "spec.cases[0].grader.assertions[0].equals",
        evalset(
            cases=[
                {
                    **CASE,
                    "grader": {
                        "type": "jsonSchema",
                        "assertions": [{"path": "$.a", "equals": "1", "exists": True}],
                    },
                }
            ]
        ),
    ),
    Invalid("evalset-bad-weight", "spec.cases[0].weight", evalset(cases=[{**CASE, "weight": 0}])),
    Invalid("evalrun-no-candidate-target", "spec.candidate.topologyRef", evalrun(candidate={})),
    Invalid(
        "evalrun-bad-version",
        "spec.candidate.version",
        evalrun(candidate={"agentRef": {"name": "a"}, "version": "HEAD"}),
    ),
    Invalid("evalrun-no-trials", "spec.trials", evalrun(trials=0)),
    Invalid(
        "workspace-currency-mix",
        "spec.modelProviders",
        workspace(modelProviders=[priced("a", "USD"), priced("b", "EUR")]),
    ),
    Invalid(
        "workspace-negative-price",
        "spec.modelProviders[0].prices.input",
        workspace(
            modelProviders=[
                {**priced("a", "USD"), "prices": {"currency": "USD", "input": "-3", "output": "1"}}
            ]
        ),
    ),
)
