"""What a run asks the reader to know: its warnings and notes, grouped, and its purchase mix.

Read from the raw ``report.json`` dict (so fields newer than the typed model, such as
``mix``, are seen, and older runs without them still load):

* **warnings**: ``series.<id>.warnings`` (``export:`` such as a quota overrun or a
  placeholder Prometheus address, ``data:`` implausible values, policy warnings),
  ``summary.missing_target`` (coverage below the target), ``failed`` and ``missing``;
* **notes**: ``series.<id>.fallbacks`` (``policy:``, ``tuning:``, ``plan:``,
  ``backtest:``, ``regularise:`` ...);
* run-wide lines, when the report carries them: ``warnings`` / ``notes`` lists at the top
  level or under ``run``.

A text shared by several series becomes one :class:`Note` naming them all. Notes are
ordered by what the reader must act on: coverage, failures, quota and export, data,
other warnings, the ``policy:`` notes, then the remaining fallbacks by topic.

The mix (``mix`` of a score dict, ``summary.mix`` for the fleet) is
``{"reserved"|"spot"|"on_demand": {"gpu_hours": float, "cost_usd": float}}``; shares are
computed here (part / total). Its absence reads "mix not recorded".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

MIX_LAYERS = (("reserved", "reserved"), ("spot", "spot"), ("on_demand", "on-demand"))
NO_MIX = "mix not recorded (this run's report.json predates the purchase mix)"

#: rank of a note's topic (the text before its first ":"); lower is shown first
_WARNING_RANK = {"coverage": 0, "failed": 1, "missing": 2, "export": 3, "quota": 3, "data": 4, "policy": 5}
_NOTE_RANK = {"policy": 10, "windows": 11, "tuning": 12, "replay": 13, "plan": 14, "backtest": 15,
              "regularise": 16}
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~$:])")


@dataclass(frozen=True)
class Note:
    """One line of the run's notes: ``text`` shared by ``series`` (empty: the whole run).

    ``level``: ``warning`` (act on it) or ``note`` (a stated fallback)."""

    text: str
    series: tuple[str, ...]
    level: str
    rank: int

    @property
    def topic(self) -> str:
        head = self.text.split(":", 1)[0]
        return head if len(head) <= 20 and " " not in head else ""

    def who(self, n_series: int) -> str:
        """``"3 series: a, b, c"``, ``"every series (12)"``, ``"train/vcMod"`` or ``"run"``."""
        if not self.series:
            return "run"
        if len(self.series) == 1:
            return self.series[0]
        pools = all(s.startswith("train/") for s in self.series)
        word = "pools" if pools else "series"
        head = f"all {len(self.series)} {word}" if len(self.series) == n_series else f"{len(self.series)} {word}"
        return f"{head}: {', '.join(self.series)}"


def _rank(text: str, level: str) -> int:
    topic = text.split(":", 1)[0].strip()
    if level == "warning":
        if "quota" in text:
            return _WARNING_RANK["quota"]
        return _WARNING_RANK.get(topic, 6)
    return _NOTE_RANK.get(topic, 20)


def run_notes(report: dict) -> list[Note]:
    """Every warning and note of the run, grouped by text and ordered (see module docstring)."""
    found: dict[tuple[str, str], list[str]] = {}

    def add(text: str, level: str, sid: str | None) -> None:
        who = found.setdefault((level, text), [])
        if sid is not None and sid not in who:
            who.append(sid)

    summary = report.get("summary") or {}
    for m in summary.get("missing_target") or []:
        add(f"coverage: {100 * m['coverage']:.1f} % on the evaluation window, below the target of "
            f"{100 * m['target']:.0f} %", "warning", m["series_id"])
    for sid, f in sorted((report.get("failed") or {}).items()):
        add(f"failed: in the {f.get('stage', '?')} stage, left out of the plan ({f.get('error', '')})",
            "warning", sid)
    for sid, why in sorted((report.get("missing") or {}).items()):
        add(f"missing: left out of the plan ({why})", "warning", sid)
    for where in (report, report.get("run") or {}):  # run-wide lines, when a report carries them
        for key, level in (("warnings", "warning"), ("notes", "note")):
            for text in where.get(key) or []:
                if isinstance(text, str):
                    add(text, level, None)
    for sid, s in sorted((report.get("series") or {}).items()):
        for w in s.get("warnings") or []:
            add(w, "warning", sid)
        for f in s.get("fallbacks") or []:
            add(f, "note", sid)
    notes = [Note(text, tuple(sorted(who)), level, _rank(text, level)) for (level, text), who in found.items()]
    return sorted(notes, key=lambda n: (n.rank, -len(n.series), n.text))


def series_notes(notes: list[Note], series_id: str) -> list[Note]:
    """The notes that concern one series, in the run's order."""
    return [n for n in notes if series_id in n.series]


def counts(notes: list[Note]) -> dict[str, int]:
    """``{"warnings": lines, "notes": lines, "warning_items": per-series items, "note_items": ...}``."""
    w = [n for n in notes if n.level == "warning"]
    o = [n for n in notes if n.level != "warning"]
    return {"warnings": len(w), "notes": len(o), "warning_items": sum(max(len(n.series), 1) for n in w),
            "note_items": sum(max(len(n.series), 1) for n in o)}


def md_escape(text: str) -> str:
    """``text`` for ``st.markdown`` as written: no emphasis, link, LaTeX (``$``) or emoji shortcode."""
    return _MD_SPECIAL.sub(r"\\\1", text)


# -- the purchase mix -------------------------------------------------------------------------
def _num(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def mix_of(entry: dict | None) -> dict | None:
    """The ``mix`` dict of a score dict or of ``summary`` (None when absent or without any layer)."""
    mix = (entry or {}).get("mix")
    if not isinstance(mix, dict) or not any(isinstance(mix.get(k), dict) for k, _ in MIX_LAYERS):
        return None
    return mix


def fleet_mix(report: dict) -> dict | None:
    """``summary.mix``; else the sum of every series' recommended mix when each has one; else None."""
    m = mix_of(report.get("summary"))
    if m is not None:
        return m
    mixes = [mix_of(s.get("recommended")) for s in (report.get("series") or {}).values()]
    if not mixes or any(x is None for x in mixes):
        return None
    out = {k: {"gpu_hours": 0.0, "cost_usd": 0.0} for k, _ in MIX_LAYERS}
    for x in mixes:
        for k, _ in MIX_LAYERS:
            for f in ("gpu_hours", "cost_usd"):
                out[k][f] += _num((x.get(k) or {}).get(f)) or 0.0
    return out


def mix_table(mix: dict) -> pd.DataFrame:
    """One row per purchase (reserved, spot, on-demand, total): GPU-hours, share of GPU-hours,
    USD, share of USD, as display strings (thousands separators, percent with one decimal)."""
    parts = {k: {f: _num((mix.get(k) or {}).get(f)) for f in ("gpu_hours", "cost_usd")} for k, _ in MIX_LAYERS}
    tot = {f: sum(p[f] or 0.0 for p in parts.values()) for f in ("gpu_hours", "cost_usd")}

    def share(v, t):
        return "n/a" if v is None or not t else f"{100 * v / t:.1f} %"

    rows = [{"purchase": label,
             "GPU-hours": "n/a" if parts[k]["gpu_hours"] is None else f"{parts[k]['gpu_hours']:,.0f}",
             "share of GPU-hours": share(parts[k]["gpu_hours"], tot["gpu_hours"]),
             "USD": "n/a" if parts[k]["cost_usd"] is None else f"${parts[k]['cost_usd']:,.0f}",
             "share of USD": share(parts[k]["cost_usd"], tot["cost_usd"])} for k, label in MIX_LAYERS]
    rows.append({"purchase": "total", "GPU-hours": f"{tot['gpu_hours']:,.0f}", "share of GPU-hours": "100 %",
                 "USD": f"${tot['cost_usd']:,.0f}", "share of USD": "100 %"})
    return pd.DataFrame(rows)


def mix_line(mix: dict | None) -> str:
    """``"reserved 0.0 % · spot 100.0 % · on-demand 0.0 % of GPU-hours"`` or :data:`NO_MIX`."""
    if mix is None:
        return NO_MIX
    t = mix_table(mix).set_index("purchase")
    return " · ".join(f"{label} {t.loc[label, 'share of GPU-hours']}" for _, label in MIX_LAYERS) + " of GPU-hours"
