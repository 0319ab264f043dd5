"""Plan-forecast fits that reuse the model registry: fit a tier on all history,
or load the model saved by an earlier run while it is fresh for the tier's cadence.

Cadences (DESIGN.md, tier table): ``hourly`` refits every run (its parameters
are still saved, for the record); ``daily`` (the global LSTM) is reused for
24 h and ``weekly`` (Prophet, per series) for 7 d, when the saved model covers
the same series and no newer data than the registry's freshness rule allows
(:meth:`forecasting.registry.ModelRegistry.load_fresh`). A saved model that
cannot be loaded means a refit and a registry warning, never a crash.
Imports nothing of ``capplan``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from forecasting.registry import ModelRegistry
from forecasting.tiers import daily_lstm
from forecasting.types import SeriesMeta


def fit_final(name: str, m, data: pd.DataFrame, meta: dict[str, SeriesMeta], registry: ModelRegistry):
    """Fit a tier for the plan forecast, reusing registry models younger than the tier's
    cadence (``daily`` 24 h, ``weekly`` 7 d); save what was fitted. Returns ``(model, log)``
    with ``log = {"reused": [...], "fitted": [...], "versions": {...}}``."""
    log = {"reused": [], "fitted": [], "versions": {}}
    sids = sorted(data["series_id"].unique())
    if not sids:
        return m, log
    ends = data.dropna(subset=["value"]).groupby("series_id")["timestamp"].agg(["min", "max"])
    if name == "daily":
        found = registry.load_fresh("daily", "_global", ends["max"].max(), sids)
        if found is not None:
            d, meta_doc = found
            try:
                m.load(str(d / "model.keras"))
                st = json.loads((d / "state.json").read_text())
                if (st.get("target"), st.get("arch")) != (daily_lstm.TARGET, daily_lstm.ARCH):
                    raise ValueError(f"trained as {st.get('target')!r}/{st.get('arch')!r}, expected "
                                     f"{daily_lstm.TARGET!r}/{daily_lstm.ARCH!r}")
                m.scale, m.tz = st["scale"], st["tz"]
                log["reused"], log["versions"]["_global"] = sids, meta_doc["version"]
                return m, log
            except Exception as exc:  # a broken file means a refit, never a crash
                registry.warnings.append(f"registry: daily model {d} could not be loaded ({exc}); refitted")
        m.fit(data, meta)
        if m.model is not None:
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "model.keras"
                m.save(str(path))
                v = registry.save("daily", "_global", {"model.keras": path, "state.json": json.dumps(
                    {"scale": m.scale, "tz": m.tz, "target": daily_lstm.TARGET, "arch": daily_lstm.ARCH}).encode()}, (ends["min"].min(), ends["max"].max()), sids)
            log["versions"]["_global"] = v
        log["fitted"] = sids
        return m, log
    if name == "weekly":
        todo = []
        for sid in sids:
            found = registry.load_fresh("weekly", sid, ends.loc[sid, "max"] if sid in ends.index else pd.Timestamp.max)
            if found is not None:
                try:
                    m.load_json(sid, (found[0] / "model.json").read_text(), meta.get(sid, SeriesMeta()).timezone)
                    log["reused"].append(sid)
                    log["versions"][sid] = found[1]["version"]
                    continue
                except Exception as exc:
                    registry.warnings.append(f"registry: weekly model {found[0]} could not be loaded ({exc}); refitted")
            todo.append(sid)
        if todo:
            m.fit(data[data["series_id"].isin(todo)], meta)
            for sid in todo:
                if sid in m.models and sid in ends.index:
                    log["versions"][sid] = registry.save("weekly", sid, {"model.json": m.to_json(sid).encode()},
                                                         (ends.loc[sid, "min"], ends.loc[sid, "max"]), [sid])
        log["fitted"] = todo
        return m, log
    m.fit(data, meta)
    if name == "hourly":
        for sid, mod in getattr(m, "models", {}).items():
            doc = json.dumps({**mod, "start": mod["start"].isoformat()}).encode()
            log["versions"][sid] = registry.save("hourly", sid, {"model.json": doc},
                                                 (ends.loc[sid, "min"], ends.loc[sid, "max"]), [sid])
    log["fitted"] = sids
    return m, log
