"""``capplan plan --quick``: the preset of a first look, and the list of what it reduced.

:func:`apply_quick` caps the search's size, the windows and the tiers' sizes (:data:`QUICK`) and
sets a coarse grid scan and sparser rolling origins (:data:`QUICK_SET`) on a
:class:`capplan.config.settings.CapplanConfig`; :func:`quick_reductions` says, line by line, what that made
smaller than a default plan (the report's ``run.quick_reductions`` and the plan's output).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from capplan.config.settings import CapplanConfig


#: ``capplan plan --quick``: section -> field -> the most a quick run uses (a smaller value in the config
#: is kept): the search's size, 3-day tuning and evaluation windows (rolling origins over 6 days: one refit
#: of each weekly-refitted tier, not two; shorter replays), the test suite's LSTM and Prophet sizes.
QUICK = {"plan": {"n_calls": 8, "tune_days": 3, "eval_days": 3},
         "forecast": {"lstm_epochs": 2, "lstm_max_windows": 400, "lstm_members": 1, "prophet_samples": 60}}
#: ``--quick``: section -> field -> the value it sets: no random search, the coarse grid scan
#: (:mod:`optimizer.search.quick_grid`) with no Gaussian-process refinement after it, training pools' rolling
#: origins 12 hours apart (at least), no holdout fit of the weekly tier's Prophet (one Prophet fit per
#: refit instead of two). A quick run's tuning window also stays at ``tune_days``: it is not widened
#: to complete weeks of evidence (``plan.evidence_weeks``, :func:`capplan.run.stages.load.prepare`).
QUICK_SET = {"plan": {"random_search": False, "scan_grid": "coarse", "gp_refine": False},
             "forecast": {"training_origin_hours": 12, "prophet_holdout": False}}
#: the model registry's subfolder of a quick run: a later default plan never reuses its smaller models
QUICK_MODELS = "quick"


def apply_quick(cfg: "CapplanConfig") -> "CapplanConfig":
    """``cfg`` with the :data:`QUICK` preset applied (each value capped), :data:`QUICK_SET`'s
    values set, the model registry moved to its :data:`QUICK_MODELS` subfolder (once) and
    ``plan.quick`` set; returns ``cfg`` (changed in place). What it reduced is :func:`quick_reductions`."""
    for section, fields in QUICK.items():
        part = getattr(cfg, section)
        for name, most in fields.items():
            setattr(part, name, min(getattr(part, name), most))
    for section, fields in QUICK_SET.items():
        for name, value in fields.items():
            part = getattr(cfg, section)
            setattr(part, name, max(getattr(part, name), value) if name == "training_origin_hours" else value)
    sep = "/" if "://" in cfg.models else os.sep
    if not cfg.plan.quick:
        cfg.models = cfg.models.rstrip("/" + os.sep) + sep + QUICK_MODELS
    cfg.plan.quick = True
    return cfg


def quick_reductions(cfg: "CapplanConfig") -> list[str]:
    """One line per part a quick run (:func:`apply_quick`) does smaller than a default plan,
    with ``cfg``'s value and the default beside it (empty when ``cfg.plan.quick`` is off); the
    report's ``run.quick_reductions`` and the plan's output list them."""
    if not cfg.plan.quick:
        return []
    plan, fc, d = cfg.plan, cfg.forecast, type(cfg)()
    search = (f"{plan.n_calls} Gaussian-process evaluations after the grid scan (default {d.plan.n_calls})"
              if plan.gp_refine else "the grid scan's policy, no Gaussian-process refinement after it (default "
              f"{d.plan.n_calls} evaluations)")
    return [f"search: {search}" + ("" if plan.random_search else ", no random search beside it"),
            f"grid scan: the {plan.scan_grid} grid (optimizer.search.quick_grid; default the {d.plan.scan_grid} grid)",
            f"windows: {plan.tune_days:g}-day tuning and {plan.eval_days:g}-day evaluation windows (default "
            f"{d.plan.tune_days:g} and {d.plan.eval_days:g}, the tuning window widened to up to "
            f"{d.plan.evidence_weeks} complete week(s) before the evaluation window): fewer rolling origins and "
            "refits, shorter replays; every figure is on the shorter evaluation window",
            f"rolling origins: every {fc.training_origin_hours} h for training pools (default "
            f"{d.forecast.training_origin_hours} h)",
            f"LSTM: {fc.lstm_members} network(s), {fc.lstm_epochs} epochs on at most {fc.lstm_max_windows} "
            f"windows (default {d.forecast.lstm_members} networks, {d.forecast.lstm_epochs} epochs on "
            f"{d.forecast.lstm_max_windows})",
            f"Prophet: {fc.prophet_samples} uncertainty samples (default {d.forecast.prophet_samples})"
            + ("" if fc.prophet_holdout else "; no holdout fit, so the weekly tier keeps all of Prophet's "
               "predicted change (default: a holdout week's fit sizes it)"),
            f"models: kept in {cfg.models}, apart from a default plan's, which never reuses them"]
