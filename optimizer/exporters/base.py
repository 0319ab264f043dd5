"""Shared pieces of the writers: the document type, the registry and YAML output."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import yaml

from forecasting.plugins import Registry
from optimizer.exporters.names import assign_names, workload_name
from optimizer.exporters.settings import ExportSettings, TargetSettings
from optimizer.plan.policy import SeriesPlan

MANAGED_BY = {"app.kubernetes.io/managed-by": "capplan"}
SERIES_ANNOTATION = "capplan.io/series-id"
FORECAST_ANNOTATION = "capplan.io/forecast-version"
SCALE_TO_ZERO_ANNOTATION = "capplan.io/allow-scale-to-zero"


@dataclass
class Doc:
    """One file to write: ``path`` relative to the output folder, the object, and
    ``notes`` (key -> comment written at the end of every line holding that key)."""

    path: str
    obj: dict
    notes: dict[str, str] = field(default_factory=dict)
    header: str = ""


@dataclass
class Context:
    """What every writer gets besides the plans: the settings, the object names, and the fleet's quotas
    (an :class:`optimizer.exporters.fleet.kueue.FleetQuota`, or None) for the Kueue writer."""

    settings: ExportSettings
    names: dict[str, str]
    fleet: object | None = None

    @classmethod
    def build(cls, plans: list[SeriesPlan], settings: ExportSettings, fleet: object | None = None) -> "Context":
        return cls(settings, assign_names([p.series_id for p in plans]), fleet)

    def target(self, plan: SeriesPlan) -> TargetSettings:
        """The workload of an inference series, defaults filled in."""
        t = self.settings.targets.get(plan.series_id, TargetSettings())
        return t.model_copy(update={"name": t.name or workload_name(plan.series_id),
                                    "namespace": t.namespace or self.settings.namespace})

    def meta(self, plan: SeriesPlan | None, name: str, namespace: str | None = None) -> dict:
        m: dict = {"name": name}
        if namespace:
            m["namespace"] = namespace
        m["labels"] = dict(MANAGED_BY)
        if plan is not None:
            m["annotations"] = {SERIES_ANNOTATION: plan.series_id, FORECAST_ANNOTATION: plan.forecast_version or ""}
        return m


Writer = Callable[[list[SeriesPlan], Context], list[Doc]]
#: The exporter registry (:class:`forecasting.plugins.Registry`): name -> writer, in registration order.
WRITERS: Registry[Writer] = Registry("exporter")


def register(name: str) -> Callable[[Writer], Writer]:
    """Decorator: add a writer to :data:`WRITERS` under ``name`` (ValueError when the name is taken)."""
    return WRITERS.register(name)


_KEY_LINE = re.compile(r"^( *)(- )?([A-Za-z0-9_.\-/]+):(?: |$)")


def key_paths(text: str) -> list[str | None]:
    """For each line of PyYAML block output (``yaml.safe_dump``, sequences not indented),
    the dotted path of the key it holds (``spec.triggers[1].metadata.start``), or None."""
    stack: list[tuple[int, str]] = []  # (indent, segment); list items are segments "[i]"
    counters: dict[str, int] = {}
    out: list[str | None] = []
    for line in text.splitlines():
        m = _KEY_LINE.match(line)
        if not m:
            out.append(None)
            continue
        indent, dash, key = len(m.group(1)), m.group(2), m.group(3)
        if dash:
            while stack and stack[-1][0] > indent:
                stack.pop()
            parent = _join(stack)
            counters[parent] = counters.get(parent, -1) + 1
            stack.append((indent + 1, f"[{counters[parent]}]"))
            indent += 2
        else:
            while stack and stack[-1][0] >= indent:
                stack.pop()
        stack.append((indent, key))
        out.append(_join(stack))
    return out


def _join(stack: list[tuple[int, str]]) -> str:
    return "".join(seg if seg.startswith("[") or not i else "." + seg for i, (_, seg) in enumerate(stack))


def render(doc: Doc) -> str:
    """YAML text of a document (``yaml.safe_dump``, no line folding), with ``notes`` as
    end-of-line comments. A note's key is a full dotted path (``spec.minReplicaCount``,
    ``spec.triggers[1].metadata.start``) or a bare key name, which applies to every line
    holding that key."""
    text = yaml.safe_dump(doc.obj, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1 << 16)
    if doc.notes:
        lines = []
        for line, path in zip(text.splitlines(), key_paths(text)):
            if path is not None and "#" not in line:
                note = doc.notes.get(path) or doc.notes.get(path.rpartition(".")[2])
                if note:
                    line = f"{line}  # {note}"
            lines.append(line)
        text = "\n".join(lines) + "\n"
    header = "".join(f"# {h}\n" if h else "#\n" for h in doc.header.splitlines()) if doc.header else ""
    return header + text


__all__ = ["Doc", "Context", "WRITERS", "register", "render"]
