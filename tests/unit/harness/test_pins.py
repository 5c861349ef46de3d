"""The harness table and hack/harness-clis pin the same versions (one list, checked)."""

from __future__ import annotations

import json

from swarmkit_api.harness import HARNESSES
from swarmkit_devcluster.harness_clis import HARNESS_CLIS_DIR, pinned
from swarmkit_devcluster.paths import hack_dir
from swarmkit_runner.harness import HARNESS_MODULES


def test_every_harness_is_pinned_exactly_in_package_json_and_the_lockfile() -> None:
    lock = json.loads((hack_dir() / HARNESS_CLIS_DIR / "package-lock.json").read_text())
    assert set(pinned()) == {h.npm_package for h in HARNESSES.values()}
    for info in HARNESSES.values():
        assert pinned()[info.npm_package] == info.version, info.kind
        assert lock["packages"][f"node_modules/{info.npm_package}"]["version"] == info.version
        assert lock["packages"][""]["dependencies"][info.npm_package] == info.version


def test_every_harness_in_the_table_has_a_runner_module() -> None:
    assert set(HARNESS_MODULES) == set(HARNESSES)
