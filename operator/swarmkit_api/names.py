"""Names derived from a user's name kept within a DNS label's limits (issue 47 item 5): the
operator's derived names (:mod:`swarmkit_operator.hashing` re-exports it) and the kubectl
plugin's imported Agent names both use :func:`dns_label`, so a name is never merely cut
(two long names sharing a prefix would collide)."""

from __future__ import annotations

import hashlib
import re

#: A DNS label's (and a label value's) length limit.
MAX_LABEL = 63
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def dns_label(name: str, suffix: str = "", limit: int = MAX_LABEL) -> str:
    """``name + suffix`` as a DNS label of at most ``limit`` characters (a Service's,
    a volume's, a label value's rules): kept when it is one, else ``name`` made one
    (characters outside ``[a-z0-9-]`` become ``-``), cut, and ended with a hash of the whole
    ``name``, so two names that differ anywhere (``a.b`` and ``a-b`` too) stay distinct."""
    room = limit - len(suffix)
    if len(name) <= room and _DNS_LABEL.match(name):
        return name + suffix
    body = re.sub(r"[^a-z0-9-]+", "-", name.lower())[: room - 11].strip("-")
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{body}-{digest}{suffix}" if body else f"{digest}{suffix}"


__all__ = ["MAX_LABEL", "dns_label"]
