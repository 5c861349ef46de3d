"""kopf settings that rely on how the handlers are written."""

from __future__ import annotations

import kopf

import swarmkit_operator.handlers  # noqa: F401 - registers the root's kopf handlers
from swarmkit_operator.handlers import root


def test_kopf_has_no_resource_handler_so_it_never_touches_an_object() -> None:
    # No persistence settings (handlers/common.configure_kopf): kopf would keep a change
    # handler's progress and diff-base in annotations (Argo CD drift) and add a finalizer.
    # Every resource event is the operator's own (handlers/events.py); this keeps it so.
    registry = kopf.get_default_registry()
    assert registry._changing.get_all_handlers() == []
    assert registry._spawning.get_all_handlers() == []
    # The handlers are registered at all: every watch is the operator's own stream now
    # (handlers/events.py), kopf watches nothing (test_rbac_table.py checks that).
    assert registry._watching.get_all_handlers() == []
    assert len(root.wiring().events.streams()) >= 10
    # One start-up handler builds everything, in its written order (handlers/root.py).
    startup = [
        h.fn for h in registry._activities.get_all_handlers() if h.activity.value == "startup"
    ]
    assert startup == [root.start]


def test_kopf_follows_no_crd_and_no_namespace() -> None:
    """Its resource and namespace observers would LIST and WATCH every CRD and (with
    watchNamespaces) every Namespace, cluster-wide; with scanning off they serve the
    namespaces they are given and read only the discovery documents, which every identity
    may (issue 41: the chart grants neither)."""
    from swarmkit_operator.config import Settings
    from swarmkit_operator.handlers import common

    settings = kopf.OperatorSettings()
    assert settings.scanning.disabled is False  # kopf's default: it would
    common.configure_kopf(settings, Settings())
    assert settings.scanning.disabled is True
