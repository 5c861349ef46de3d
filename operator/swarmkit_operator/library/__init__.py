"""The skill library: which agents grant each Skill, how its Runs used it, its versions.

* :mod:`.records` — the per-namespace records and the pure roll-up of finished Runs into
  them, and their ConfigMap form (``swarmkit-skill-library``, one per namespace);
* :mod:`.store` — :class:`SkillLibrary`: fed by watch events, flushed in batches (the
  ConfigMap, and each Skill's ``status.grantedBy`` / ``status.usage``), metrics.

Kopf-free (import-linter contract ``kopf-allow-list``); ``handlers.library`` wires it up.
"""

from .store import SkillLibrary

__all__ = ["SkillLibrary"]
