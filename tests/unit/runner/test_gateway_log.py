"""The MCP gateway's pod log: whose lines, and no secret in them (issue 46).

Every session of a gateway writes to the one pod log, each line labelled with the name of
the bearer token that opened the session; whoever may ``get pods/log`` in the namespace
reads all of it. The gateway is the one runner pod that mounts its service-account token
(to follow its Reviews), and any tool of any session can read that file: its value is
scrubbed from every line like the env secrets, also after the kubelet rotates it.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from swarmkit_api.agent import GatewayToken
from swarmkit_api.bundle import BundleGateway, RunBundle, secret_env_name
from swarmkit_api.common import SecretKeyRef
from swarmkit_runner.audit import AuditLog
from swarmkit_runner.gateway import Gateway
from swarmkit_runner.paths import RunnerPaths
from swarmkit_runner.secrets import REDACTED, SecretStore
from tests.support.bundles import agent, bundle, mcp_tool_skill, stdio_server, write_bundle
from tests.support.mcp_servers import stdio_command

ALICE = SecretKeyRef(name="gateway-tokens", key="alice")
CI = SecretKeyRef(name="gateway-tokens", key="ci")
TOKENS = {ALICE: "alice-token-6b1d9e", CI: "ci-token-0c44a1"}
#: What a projected service-account token looks like (a JWT), before and after rotation.
SA_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJndy1jb2RlciJ9.c2lnbmF0dXJlLW9uZQ"
ROTATED = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJndy1jb2RlciJ9.c2lnbmF0dXJlLXR3bw"


def _write_token(sa_dir: Path, value: str) -> None:
    """As the kubelet does: a new file swapped in (new inode), never edited in place."""
    sa_dir.mkdir(parents=True, exist_ok=True)
    fresh = sa_dir / ".token.new"
    fresh.write_text(value)
    os.replace(fresh, sa_dir / "token")


def test_a_watched_file_is_scrubbed_as_it_is_now(tmp_path: Path) -> None:
    secrets = SecretStore({})
    missing = tmp_path / "nothing-here"
    secrets.watch_file(missing)  # no file: no secret, no error
    assert secrets.scrub("plain text") == "plain text"
    _write_token(tmp_path, SA_TOKEN)
    secrets.watch_file(tmp_path / "token")
    assert secrets.scrub(f"token={SA_TOKEN}") == f"token={REDACTED}"
    _write_token(tmp_path, ROTATED)
    # read again at the next scrub; the old value stays scrubbed too
    assert secrets.scrub(f"{ROTATED} {SA_TOKEN}") == f"{REDACTED} {REDACTED}"


def _gateway_bundle() -> RunBundle:
    b = bundle(
        agents=[agent("coder", skills=["echo-skill"], description="Coding helper.")],
        skills=[mcp_tool_skill("echo-skill", "t", "echo", description="Echo text back.")],
        mcp_servers=[stdio_server("t", stdio_command("upstream"))],
    )
    tokens = [
        GatewayToken(name="alice", secret_key_ref=ALICE),
        GatewayToken(name="ci", secret_key_ref=CI),
    ]
    return b.model_copy(update={"gateway": BundleGateway(port=0, tokens=tokens)})


async def test_every_session_logs_under_its_token_name_and_never_the_service_account_token(
    tmp_path: Path,
) -> None:
    """Two identities on one gateway; a tool (here an echo, standing for a bash call or an
    MCP server that reads ``/var/run/secrets/...``) prints the pod's service-account token,
    before and after the kubelet rotates it: every line names its session's token name
    (never a token value) and the service-account token is ``[REDACTED]`` in each."""
    b = _gateway_bundle()
    layout = write_bundle(b, tmp_path / "pod")
    paths = RunnerPaths.resolve(str(layout.bundle_dir), str(layout.skills_dir))
    sa_dir = tmp_path / "serviceaccount"
    _write_token(sa_dir, SA_TOKEN)
    secrets = SecretStore({secret_env_name(ref): value for ref, value in TOKENS.items()})
    sink = io.StringIO()
    audit = AuditLog(b.run.uid, b.run.correlation_id, secrets, sink=sink)
    gateway = Gateway(b, paths, audit, secrets, service_account_dir=sa_dir)
    await gateway.start()
    try:
        alice = gateway.session("session-a", "alice")
        ci = gateway.session("session-c", "ci")
        first = await gateway.call_tool(alice, "echo-skill", {"text": f"token: {SA_TOKEN}"})
        _write_token(sa_dir, ROTATED)
        second = await gateway.call_tool(ci, "echo-skill", {"text": f"token: {ROTATED}"})
    finally:
        await gateway.aclose()
    assert not first.is_error and not second.is_error

    log = sink.getvalue()
    assert SA_TOKEN not in log and ROTATED not in log
    for value in TOKENS.values():
        assert value not in log
    events = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    calls = [e for e in events if e["event"] == "tool.call"]
    assert [(c["identity"], c["session"]) for c in calls] == [
        ("alice", "session-a"),
        ("ci", "session-c"),
    ]
    assert all(c["input"] == {"text": f"token: {REDACTED}"} for c in calls), calls
    [start] = [e for e in events if e["event"] == "gateway.start"]
    assert start["identities"] == ["alice", "ci"]
