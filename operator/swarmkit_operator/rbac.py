"""What the operator may do in the Kubernetes API: the one table the chart's RBAC is made of.

Each :class:`Grant` says which verbs on which resources, where (every watched namespace,
the cluster, or the release namespace for the leader election's Lease) and why. One scope is
not the chart's: ``team`` is a grant a team gives the operator on purpose, in its own
namespace, for one named object (a mailbox webhook's Secret); the code's call is checked
against it like any other, the chart never renders it, and the RBAC reference page shows
the Role a team applies. No grant of the chart names Secrets: the operator reads none
unless a team grants it one.
``crdgen`` renders the chart's rule templates from it (``templates/_rbac_rules.tpl``,
drift-checked by ``make verify``), and ``tests/unit/operator/test_rbac_table.py`` derives
the API calls the code makes (its ``k8s`` calls, the resources it watches and lists) and
fails when one is not granted here or a grant here is used by nothing. The integration
suite runs every operator with the rendered chart's ServiceAccount, so the apiserver
itself refuses a call the table missed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal["namespaced", "cluster", "lease", "team"]


@dataclass(frozen=True)
class Grant:
    """One RBAC rule, with the reason the operator needs it."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str
    scope: Scope = "namespaced"
    #: Only these objects (``resourceNames``); a Helm expression may stand in a name.
    names: tuple[str, ...] = ()


#: The chart's Lease name, as a Helm expression (rendered into the template as is).
LEASE_NAME = (
    '{{ .Values.leaderElection.leaseName | default (include "swarmkit-operator.fullname" .) }}'
)

GRANTS: tuple[Grant, ...] = (
    Grant(
        "swarmkit.dev",
        ("workspaces", "skills", "agents", "topologies", "runs"),
        ("list", "watch"),
        "Watch the kinds it reconciles. It never writes their spec, labels or annotations.",
    ),
    Grant(
        "swarmkit.dev",
        ("funnels",),
        ("list", "watch"),
        "Watch Funnels: a Topology node's funnel is checked, versioned and pinned by Runs.",
    ),
    Grant(
        "swarmkit.dev",
        ("funnels/status",),
        ("patch",),
        "A Funnel's Accepted/Ready conditions and version.",
    ),
    Grant(
        "swarmkit.dev",
        ("evalsets", "evalruns"),
        ("list", "watch"),
        "Watch EvalSets (checked, versioned) and EvalRuns (each case a Run it creates).",
    ),
    Grant(
        "swarmkit.dev",
        ("evalsets/status", "evalruns/status"),
        ("patch",),
        "An EvalSet's Accepted/Ready; an EvalRun's per-case results, intervals and verdict.",
    ),
    Grant(
        "swarmkit.dev",
        ("evalruns",),
        ("create", "get"),
        "Start the EvalRun of a Topology's or Agent's candidate version (spec.promotion); "
        "read the one found under its planned name when the create finds it taken (to check it).",
    ),
    Grant(
        "swarmkit.dev",
        ("skills", "runs"),
        ("get",),
        "Read one Skill (a reconcile whose watch event carried no body) or Run (its latest "
        "status before a Job is recreated).",
    ),
    Grant(
        "swarmkit.dev",
        ("workspaces/status", "skills/status", "agents/status", "topologies/status", "runs/status"),
        ("patch",),
        "Status is the operator's (server-side apply or merge patch, one field manager per "
        "controller): conditions, versions, pins, Run outcomes.",
    ),
    Grant(
        "swarmkit.dev",
        ("reviews",),
        ("create", "get", "list", "watch"),
        "Human review: it opens every Review, for each question a parked Run, a swarm-authored "
        "Skill or an Agent gateway's session (asked on its pod's log) reports; it never "
        "writes spec.decision (the admission policy refuses it).",
    ),
    Grant(
        "swarmkit.dev",
        ("reviews/status",),
        ("patch",),
        "What it made of a decision (Resumed, Expired, Decided; who, when).",
    ),
    Grant(
        "swarmkit.dev",
        ("spendquotas",),
        ("get", "list", "watch"),
        "SpendQuotas: which quotas cover a Run before it starts (read fresh, never cached: "
        "reservations are guarded by resourceVersion); watched by name only, so a namespace "
        "without one costs a starting Run no LIST and a raised limit wakes waiting Runs.",
    ),
    Grant(
        "swarmkit.dev",
        ("spendquotas/status",),
        ("patch",),
        "Reserve a Run's cap, settle its spend, follow the window (merge patches carrying "
        "metadata.resourceVersion: optimistic concurrency).",
    ),
    Grant(
        "swarmkit.dev",
        ("topologies", "agents"),
        ("get",),
        "The labels of a Run's Topology or Agent, matched against a SpendQuota's selector; "
        "an Agent's permissions when its Run approves a child Run's spend (approve_spend).",
    ),
    Grant(
        "swarmkit.dev",
        ("runs",),
        ("create", "delete"),
        "Scheduled Runs (Topology spec.schedule), an EvalRun's case and judge Runs, and Run "
        "retention (TTL, historyLimit).",
    ),
    Grant(
        "swarmkit.dev",
        ("mailboxmessages",),
        ("create", "list", "watch", "patch"),
        "A Run's mailbox_send effects become MailboxMessages (created once, by name); the "
        "webhook delivery lists the pending ones and relabels them delivered or failed (it "
        "never writes their spec: people acknowledge them); the web view's mailboxes page "
        "lists and watches them.",
    ),
    Grant(
        "swarmkit.dev",
        ("mailboxmessages/status",),
        ("patch",),
        "The webhook delivery of a mailbox item (state, attempts, last error; never the URL).",
    ),
    Grant(
        "swarmkit.dev",
        (
            "workspaces/finalizers",
            "skills/finalizers",
            "agents/finalizers",
            "topologies/finalizers",
            "runs/finalizers",
        ),
        ("update",),
        "Its ConfigMaps, Jobs, Deployments carry ownerReferences with blockOwnerDeletion; "
        "the OwnerReferencesPermissionEnforcement admission plugin (e.g. OpenShift) "
        "requires this.",
    ),
    Grant(
        "",
        ("configmaps",),
        ("create", "get", "list", "watch", "patch", "update", "delete"),
        "Rendered, immutable, content-addressed ConfigMaps (created once, deleted when "
        "unused; patch only labels a finished Run's bundle), Skill files read from users' "
        "ConfigMaps, and the skill library swarmkit-skill-library and its shards "
        "swarmkit-skill-library-<i> (updated in place; RBAC cannot name a prefix).",
    ),
    Grant(
        "batch",
        ("jobs",),
        ("create", "get", "list", "watch", "delete"),
        "One Job per Run; deleted to cancel.",
    ),
    Grant(
        "",
        ("pods",),
        ("list", "watch", "patch"),
        "A Run pod's phase, exit code and termination message; patch removes the "
        "operator's own swarmkit.dev/run-outcome finalizer.",
    ),
    Grant(
        "",
        ("pods/log",),
        ("get",),
        "A parked run's checkpoint line (stored in an immutable ConfigMap), and the review "
        "asks an Agent gateway's pods print (followed while they run).",
    ),
    Grant(
        "apps",
        ("deployments",),
        ("create", "get", "list", "watch", "patch", "delete"),
        "A served Topology (spec.serve) and an Agent's MCP gateway (spec.gateway): "
        "server-side applied (patch, and create when missing), owned by the Topology or "
        "Agent, deleted when the field goes.",
    ),
    Grant(
        "",
        ("services",),
        ("create", "get", "patch", "delete"),
        "Their Services (server-side applied; get: an existing one is applied over only when "
        "the operator made it for that owner).",
    ),
    Grant(
        "",
        ("serviceaccounts",),
        ("create", "get", "patch", "delete"),
        "A gateway's own ServiceAccount gw-<agent>: it follows its Reviews as itself.",
    ),
    Grant(
        "rbac.authorization.k8s.io",
        ("roles", "rolebindings"),
        ("create", "get", "patch", "delete"),
        "The gateway's Role + RoleBinding (get/watch Reviews only: verbs the operator "
        "holds, so RBAC lets it grant them without escalate or bind).",
    ),
    Grant(
        "",
        ("events",),
        ("create", "list", "patch"),
        "An Event for every condition transition (a repeat of one within 10 minutes patches "
        "its count); a Job's warning Events explain a failed pod.",
    ),
    Grant(
        "coordination.k8s.io",
        ("leases",),
        ("create",),
        "Leader election: the Lease is created by the first replica (create cannot be "
        "limited to a name).",
        scope="lease",
    ),
    Grant(
        "coordination.k8s.io",
        ("leases",),
        ("get", "update"),
        "Leader election: read, acquire and renew only the chart's Lease.",
        scope="lease",
        names=(LEASE_NAME,),
    ),
    Grant(
        "authorization.k8s.io",
        ("subjectaccessreviews",),
        ("create",),
        "The web view's per-user pages: whether the person behind the proxy may list or get "
        "each kind in a namespace (answers only, it grants nothing).",
        scope="cluster",
    ),
    Grant(
        "node.k8s.io",
        ("runtimeclasses",),
        ("get",),
        "A Workspace's or Agent's runtimeClassName must name a RuntimeClass: a missing one "
        "keeps the Run Pending with reason RuntimeClassNotFound instead of a pod that the "
        "apiserver refuses.",
        scope="cluster",
    ),
    Grant(
        "networking.k8s.io",
        ("networkpolicies",),
        ("create", "get", "patch", "delete"),
        "Run isolation: a NetworkPolicy per Run (owned by it), per served Topology and per "
        "Agent gateway lets their pods reach only DNS and the declared destinations.",
    ),
    Grant(
        "",
        ("secrets",),
        ("get",),
        "Not in the chart: a team that routes a Workspace mailbox to a webhook grants it, in "
        "its own namespace, for the one Secret holding the URL (a Role with resourceNames, "
        "bound to the operator's ServiceAccount). The URL is read when an item is posted and "
        "never stored, logged or put in status; without the grant the item's delivery says "
        "which grant is missing.",
        scope="team",
    ),
)


def grants(scope: Scope) -> tuple[Grant, ...]:
    return tuple(g for g in GRANTS if g.scope == scope)


def allows(group: str, resource: str, verb: str, name: str | None = None) -> bool:
    """Whether some grant allows ``verb`` on ``group``/``resource`` (``name`` if named)."""
    for g in GRANTS:
        if g.group != group or resource not in g.resources or verb not in g.verbs:
            continue
        if g.names and name is not None and name not in g.names and LEASE_NAME not in g.names:
            continue
        return True
    return False


def _wrap(text: str, width: int = 90) -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines


def _rule(g: Grant) -> str:
    out = [f"# {line}" for line in _wrap(g.why)]
    out.append(f"- apiGroups: [{g.group or chr(34) * 2}]")
    out.append(f"  resources: [{', '.join(g.resources)}]")
    if g.names:
        out.append(f"  resourceNames: [{', '.join(_quoted(n) for n in g.names)}]")
    out.append(f"  verbs: [{', '.join(g.verbs)}]")
    return "\n".join(out)


def _quoted(name: str) -> str:
    return f"{name[:-2].rstrip()} | quote }}}}" if name.startswith("{{") else f'"{name}"'


def chart_template() -> str:
    """``templates/_rbac_rules.tpl``: the chart's rule lists, rendered from :data:`GRANTS`."""
    namespaced = "\n".join(_rule(g) for g in grants("namespaced"))
    cluster = "\n".join(_rule(g) for g in grants("cluster"))
    lease = "\n".join(_rule(g) for g in grants("lease"))
    return f"""{{{{/* GENERATED by `make generate` from operator/swarmkit_operator/rbac.py (the one
     table of what the operator may do); `make verify` fails when it drifts. */}}}}

{{{{/* What the operator does in each watched namespace (all of them in cluster-wide mode). */}}}}
{{{{- define "swarmkit-operator.namespacedRules" -}}}}
{namespaced}
{{{{- end }}}}

{{{{/* Cluster-scoped reads, the same in both modes (no Namespaces, no CRDs, no Secrets). */}}}}
{{{{- define "swarmkit-operator.clusterRules" -}}}}
{cluster}
{{{{- end }}}}

{{{{/* Leader election: the Lease in the release namespace. */}}}}
{{{{- define "swarmkit-operator.leaseRules" -}}}}
{lease}
{{{{- end }}}}
"""
