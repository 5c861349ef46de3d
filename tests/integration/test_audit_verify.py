"""A real Run's hash-chained audit log (issue 41 item 5): the runner chains its lines, the
operator copies the head from the pod's termination message into ``status.audit``, and
``kubectl swarmkit logs --verify`` accepts the pod's log and a faithful copy, and refuses a
copy with an edited line, a removed line or a reordered pair, naming the line. A parked and
resumed Run has one chain per pod: the status keeps both heads and each verifies."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from swarmkit_api.audit_chain import audit_lines
from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube

from .review_support import (
    answer_and_resume,
    escalating_deploy,
    park_deploy_run,
    review_admission,  # noqa: F401  (fixture)
)
from .runs_support import (
    OperatorProcess,
    apply_examples,
    cli,
    create,
    debug,
    finished,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)


@pytest.fixture
def audited(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> tuple[str, dict[str, Any], list[str]]:
    """A finished Run of the example pipeline (a coordinator delegating to a reviewer, both
    on one stream) and its audit lines as ``logs -o json`` saved them."""
    apply_examples(kube, namespace)
    wait_ready(kube, namespace, "Topology", "review-pipeline")
    create(kube, namespace, run_manifest("audited", correlationId="pr-41"))
    run = wait_run(kube, namespace, "audited", finished, operator=operator)
    cond = succeeded(run)
    assert cond and cond["status"] == "True", debug(kube, namespace, operator)
    res = cli(cluster, "logs", "run/audited", "-n", namespace, "-o", "json")
    assert res.returncode == 0, res.stderr
    return namespace, run, res.stdout.split("\n")[:-1]


def held(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "audited.log"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def verify_copy(cluster: LocalCluster, ns: str, tmp_path: Path, lines: list[str]) -> Any:
    path = tmp_path / "audited.log"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return cli(cluster, "logs", "run/audited", "-n", ns, "--verify", "--file", str(path))


def test_the_pods_log_and_a_faithful_copy_verify_against_the_head_in_the_status(
    cluster: LocalCluster, audited: tuple[str, dict[str, Any], list[str]], tmp_path: Path
) -> None:
    ns, run, lines = audited
    (chain,) = run["status"]["audit"]
    assert chain["pod"] == run["status"]["podName"]
    assert chain["lines"] == len(lines) > 5
    assert chain["head"] == hashlib.sha256(lines[-1].encode()).hexdigest()
    records = [json.loads(line) for line in lines]
    assert {"coordinator", "reviewer"} <= {r.get("agent") for r in records}  # both, one chain
    res = cli(cluster, "logs", "run/audited", "-n", ns, "--verify")
    assert res.returncode == 0, res.stderr
    assert f"{len(lines)} audit lines, chain intact" in res.stdout
    res = verify_copy(cluster, ns, tmp_path, lines)
    assert res.returncode == 0, res.stderr


def test_an_edited_a_removed_and_a_reordered_line_each_fail_naming_the_line(
    cluster: LocalCluster, audited: tuple[str, dict[str, Any], list[str]], tmp_path: Path
) -> None:
    ns, _, lines = audited
    edited = list(lines)
    record = json.loads(edited[1])
    record["event"] = "tool.refused"  # the same line, one field changed
    edited[1] = json.dumps(record, ensure_ascii=False)
    removed = lines[:2] + lines[3:]
    reordered = [*lines[:3], lines[4], lines[3], *lines[5:]]
    for copy, message in (
        (edited, "line 2 is not the line the run wrote"),
        (removed, "line 3 does not follow line 2: a line between them was removed"),
        (reordered, "line 4 is out of order: the run wrote it right after line 5"),
    ):
        res = verify_copy(cluster, ns, tmp_path, copy)
        assert res.returncode == 1, (message, res.stdout, res.stderr)
        assert "NOT verified" in res.stderr and message in res.stderr, res.stderr


def _pod_log(kube: Kube, ns: str, pod: str) -> list[str]:
    """The pod's log as written (split at newlines only, like ``logs --verify``)."""
    resp = kube.core.read_namespaced_pod_log(pod, ns, _preload_content=False)
    try:
        return bytes(resp.data).decode("utf-8").split("\n")
    finally:
        resp.release_conn()


@pytest.mark.usefixtures("review_admission")
def test_a_resumed_run_keeps_each_pods_chain_head_and_each_verifies(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    ns = namespace
    escalating_deploy(cluster, kube, ns)
    parked = park_deploy_run(kube, ns, operator)
    (first,) = parked["status"]["audit"]
    run = answer_and_resume(cluster, kube, ns, "ship", operator)

    # Both pods' heads, oldest first: the parked pod's unchanged, the resumed pod's last.
    heads = run["status"]["audit"]
    assert [h["pod"] for h in heads] == [first["pod"], run["status"]["podName"]]
    assert heads[0] == first and heads[0]["pod"] != heads[1]["pod"]
    res = cli(cluster, "logs", "run/ship", "-n", ns, "--verify")
    assert res.returncode == 0, (res.stdout, res.stderr)
    for h in heads:
        assert f"verified: pod {h['pod']}: {h['lines']} audit lines, chain intact" in res.stdout

    # A copy of both pods' logs, one after the other, verifies chain by chain.
    logs = [_pod_log(kube, ns, h["pod"]) for h in heads]
    copy = tmp_path / "ship.log"
    copy.write_text("\n".join(logs[0] + logs[1]), encoding="utf-8")
    res = cli(cluster, "logs", "run/ship", "-n", ns, "--verify", "--file", str(copy))
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert f"(chain 2 of 2, pod {heads[1]['pod']}): {heads[1]['lines']} audit" in res.stdout

    # An edit in the first pod's part fails that chain, naming its line; the second holds.
    numbered = audit_lines(logs[0])
    number, text, record = numbered[1]
    edited = list(logs[0])
    edited[number - 1] = text.replace(f'"event": "{record["event"]}"', '"event": "forged"')
    assert edited[number - 1] != text
    copy.write_text("\n".join(edited + logs[1]), encoding="utf-8")
    res = cli(cluster, "logs", "run/ship", "-n", ns, "--verify", "--file", str(copy))
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert (
        f"NOT verified: {copy} (chain 1 of 2, pod {heads[0]['pod']}): line {number} is not "
        "the line the run wrote" in res.stderr
    ), res.stderr
    assert f"verified: {copy} (chain 2 of 2" in res.stdout
