"""Images → local commands: the image table (:class:`ImageMap`, matched against the image
repository and then the full reference) and the Kubernetes ``command``/``args`` rules
(:func:`build_argv`). See the package docstring for the built-in table."""

from __future__ import annotations

import fnmatch
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from swarmkit_devcluster.kubeapi import JSON

PYTHON_ALIASES = re.compile(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$")


@dataclass(frozen=True)
class ImageRule:
    match: str
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


BUILTIN_IMAGE_RULES: tuple[ImageRule, ...] = (
    ImageRule(
        "*swarmkit-runtime",
        entrypoint=("{python}", "-m", "swarmkit_runner"),
        env=(("PYTHONUNBUFFERED", "1"),),
    ),
    ImageRule(
        "*swarmkit-operator",
        entrypoint=("{python}", "-m", "swarmkit_operator"),
        env=(("PYTHONUNBUFFERED", "1"),),
    ),
    ImageRule("python", cmd=("{python}",), env=(("PYTHONUNBUFFERED", "1"),)),
    ImageRule("*/python", cmd=("{python}",), env=(("PYTHONUNBUFFERED", "1"),)),
)


def image_repository(image: str) -> str:
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        ref = ref[: len(ref) - len(last)] + last.split(":", 1)[0]
    return ref


class ImageMap:
    def __init__(self, rules: tuple[ImageRule, ...], source: str) -> None:
        self.rules = rules
        self.source = source

    @classmethod
    def load(cls, path: str | None) -> ImageMap:
        if not path:
            return cls(BUILTIN_IMAGE_RULES, "the built-in image table")
        data = yaml.safe_load(Path(path).read_text()) or {}
        rules = []
        for r in data.get("images", []):
            rules.append(
                ImageRule(
                    match=str(r["match"]),
                    entrypoint=tuple(str(x) for x in r.get("entrypoint", r.get("command", []))),
                    cmd=tuple(str(x) for x in r.get("cmd", r.get("args", []))),
                    env=tuple((str(k), str(v)) for k, v in (r.get("env") or {}).items()),
                )
            )
        if data.get("includeBuiltins", True):
            rules += BUILTIN_IMAGE_RULES
        return cls(tuple(rules), f"image table {path}")

    def resolve(self, image: str) -> ImageRule | None:
        repo = image_repository(image)
        for rule in self.rules:
            if fnmatch.fnmatchcase(repo, rule.match) or fnmatch.fnmatchcase(image, rule.match):
                return rule
        return None


def subst_python(s: str) -> str:
    """Replace ``{python}`` in an image-table entry with the node's interpreter."""
    return s.replace("{python}", sys.executable)


def build_argv(rule: ImageRule, container: JSON) -> list[str]:
    command = container.get("command") or []
    args = container.get("args") or []
    if command:
        argv = list(command) + list(args)
    elif args:
        argv = [subst_python(x) for x in rule.entrypoint] + list(args)
    else:
        argv = [subst_python(x) for x in rule.entrypoint + rule.cmd]
    if argv and PYTHON_ALIASES.match(argv[0]):
        argv[0] = sys.executable
    return argv
