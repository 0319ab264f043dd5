"""Kubernetes object names from series ids.

Object names written here are RFC 1123 labels (Kubernetes docs "Object Names
and IDs": at most 63 characters, lower-case alphanumerics or ``-``, starting
and ending with an alphanumeric). A series id such as ``train/Team_A`` is
lower-cased, every run of other characters becomes ``-``, and, because that
mapping is lossy (``train/Team_A`` and ``train/team-a`` would both read
``train-team-a``), a 6-hex-digit suffix of the id's SHA-1 is appended:
``train-team-a-1b2c3d``. The suffix depends only on the id, so a name stays
the same from run to run whatever other series are planned.
"""

from __future__ import annotations

import hashlib
import re

RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_LABEL = 63
SUFFIX_LEN = 6


def is_label(name: str) -> bool:
    """True when ``name`` is an RFC 1123 label (<= 63 chars)."""
    return isinstance(name, str) and len(name) <= MAX_LABEL and bool(RFC1123_LABEL.match(name))


def sanitise(text: str, max_len: int = MAX_LABEL) -> str:
    """Lower-case, runs of characters outside ``[a-z0-9]`` -> ``-``, trimmed to ``max_len``."""
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return (s[:max_len].rstrip("-")) or "series"


def k8s_name(series_id: str, prefix: str = "") -> str:
    """RFC 1123 label for ``series_id`` (with an optional ``prefix``).

    The id itself is kept when it already is a label; otherwise the sanitised
    form gets a ``-<sha1[:6]>`` suffix (collision-safe, stable).
    """
    raw = f"{prefix}{series_id}"
    if is_label(raw):
        return raw
    digest = hashlib.sha1(series_id.encode("utf-8")).hexdigest()[:SUFFIX_LEN]
    return f"{sanitise(raw, MAX_LABEL - SUFFIX_LEN - 1)}-{digest}"


def assign_names(series_ids: list[str]) -> dict[str, str]:
    """``series_id -> name`` for a set of series.

    Raises
    ------
    ValueError: two ids map to the same name (only possible on a hash
        collision of the 6-digit suffix; rename one series).
    """
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for sid in series_ids:
        n = k8s_name(sid)
        if n in seen and seen[n] != sid:
            raise ValueError(f"series {seen[n]!r} and {sid!r} both map to the object name {n!r}")
        seen[n] = sid
        out[sid] = n
    return out


def workload_name(series_id: str) -> str:
    """Default Deployment name of an inference series: the id's last part, sanitised
    (``infer/llm-chat`` -> ``llm-chat``). Override per series with ``export.targets``."""
    return sanitise(series_id.rsplit("/", 1)[-1])
