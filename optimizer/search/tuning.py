"""Per-series tuning: search a policy on the tuning window, score it on the evaluation window.

:func:`search_one` is the unit of work the executor distributes: one
:class:`SearchTask` (plain, picklable data) in, one :class:`SearchOutcome` out.
It runs the Bayesian search (and, with ``random_search``, a random search with
the same budget) against :func:`optimizer.search.policy_search.objective_value` at
``coverage_target + coverage_margin``, then replays the tuned, random-search and
baseline policies on the evaluation window, which the search never saw.

:class:`PolicyReplay` is the one place that dispatches on the series' kind:
training pools replay with :func:`optimizer.engine.replay.replay_training` and the
training baseline (the rules of thumb), inference services with
:func:`optimizer.engine.replay.replay_inference` and the inference baseline; both
with the peer policies (:mod:`optimizer.rivals.peers`) and the perfect-foresight
limit (:mod:`optimizer.rivals.perfect_foresight`).

**Never worse than the status quo.** After the search, the baseline and every
peer are scored with the same objective on the tuning window. When one of
them beats the searched policy there (a training pool's rival by more than the
noise of the window's days, :mod:`optimizer.rivals.judge`: a paired comparison of the
daily costs), it is the recommendation
(``recommended_policy`` names it, ``notes`` say why), and its evaluation
figures are the recommended figures. For inference services a tie goes to the
rival too: a searched policy is only worth recommending over a rule a careful
engineer sets up without capplan if it beats it; a tuning window too short to tell
policies apart can leave several at the same cost, and the tie-break would otherwise pick
by safety alone. (Training pools keep their tie-break, :func:`optimizer.search.policy_search.pick_best`.) An inference
peer is judged, recommended and exported as the policy that expresses it (:mod:`optimizer.rivals.expressed`), so the
manifests replay to the recommended figures. A rival with no expression (the baseline, the hourly training peers) is
never the recommendation: the exports cannot carry it, so the kept policy (the calibrated rule or the searched policy)
stays recommended, its figures are the exported objects' replay, and a note names the cheaper rival (its figures are its
own row).

**Refinement.** The search starts from the best policy of a deterministic scan of the cost-optimal layers
(:func:`optimizer.search.policy_search.grid_scan`; for inference services without a grid, the best of the anchors);
``tuning["refinement_usd"]`` is how much the Gaussian-process search lowered the tuning objective below it, and it is
kept only above :data:`REFINE_MIN` (3 %) of it, and never on a tuning window shorter than a day
(:data:`REFINE_MIN_WINDOW_S`: too few steps to tell a gain from noise; a note says so). For the same reason an inference
service with such a tuning window is searched in the HPA family only: the ``lookahead`` family
(:mod:`optimizer.inference.lookahead`) learns its headroom from the service's own errors, which a window of minutes does
not hold (a note says so; docs/method.md, "Measured on the sample: short tuning windows"). The scan picks its policy by
the worst objective of it and its grid neighbours, so the refinement's point is judged the same way before it may
replace it (:func:`optimizer.search.policy_search.neighbour_objective`; ``tuning["gp_neighbour_objective"]`` against
``tuning["anchor_neighbour_objective"]``, also by at least :data:`REFINE_MIN`): a point on a narrow ridge, which a
slightly different forecast or seed would push off, does not displace a policy in a flat region. Without this, which
seed found such a ridge decided the plan.
**Incumbent.** A training pool's searched policy is recommended only when it beats the calibrated
rule of :mod:`optimizer.rivals.incumbent` on the tuning window by more than the days' noise (setting
``plan.training_incumbent``); the rivals are then judged against the policy kept, by the same paired
test of daily objectives (:func:`optimizer.search.objective.daily_objectives`, at the plain coverage target).
A calibrated top-up carries the margin of the last replayed hour, and a calibrated daily rule
the errors of the evaluation window's last 7 days, for the plan
(:func:`optimizer.training.calibrated_day.with_plan_terms`).

**One scenario for every run seed.** Every scored replay, tuning and evaluation, draws its spot interruptions
(:func:`optimizer.engine.replay.spot_losses`) from :data:`SCENARIO_STREAM`, whatever the run's seed (common random
numbers, Law, *Simulation Modeling and Analysis*, 5th ed., 2015, 11.2): the seed moves the planner, not the
world it is judged in, so two seeds that reach the same policy report the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from optimizer.book.purchase_check import QuotaCheck, purchase_check, recommended_replay
from optimizer.engine.replay import replay_inference, replay_training
from optimizer.engine.replay_core import ReplayInput
from optimizer.inference.lookahead import cold_steps, lead_steps
from optimizer.plan.policy import InferenceParams, Metrics, TrainingParams
from optimizer.rivals import baseline as base
from optimizer.rivals.expressed import expressed_params, expressible
from optimizer.rivals.incumbent import challenge, incumbent_for, kept_name
from optimizer.rivals.judge import RULE_KEPT, SEARCHED_KEPT, days_totals, rival_margin, rival_wins
from optimizer.rivals.peers import replay_peers
from optimizer.rivals.perfect_foresight import OracleResult, inference_oracle, regret, training_oracle
from optimizer.search.noise_ties import noise_tie_notes
from optimizer.search.objective import daily_objectives, objective_value, reference_cost
from optimizer.search.policy_search import grid_scan, neighbour_objective, run_search
from optimizer.search.quick_grid import scan_grid, scan_only
from optimizer.search.selection import WeeklyScore, selection_score
from optimizer.search.settings import SearchSettings
from optimizer.search.space import Space, inference_space, training_space
from optimizer.training.calibrated_day import with_plan_terms
from optimizer.training.intermittent import intermittent_space

REFINE_MIN = 0.03
REFINE_MIN_WINDOW_S = 86400  # a shorter tuning window keeps the scan's policy (module docstring)
SCENARIO_STREAM = 0  # spot-interruption draws of every replay scored, tuning and evaluation (module docstring)


@dataclass(frozen=True)
class PolicyReplay:
    """Replays of one kind of series (``training`` or ``inference``) under ``settings``.

    ``replay(params, inp)`` and ``baseline(inp)`` return ``(Metrics, series)``
    where ``series["provisioned"]`` is the capacity per step (GPUs or replicas).
    """

    kind: str
    settings: SearchSettings
    seed: int = 0

    def params(self, values: dict) -> TrainingParams | InferenceParams:
        """A full parameter dict as the kind's policy model (raises pydantic.ValidationError)."""
        return TrainingParams(**values) if self.kind == "training" else InferenceParams(**values)

    def replay(self, p, inp: ReplayInput):
        s = self.settings
        if self.kind == "training":
            return replay_training(inp, p, s.interruption_rate, s.recovery_s, s.queue_unmet, self.seed)
        return replay_inference(inp, p, s.cold_start_s, metrics_lag_s=s.metrics_lag_s)

    def baseline(self, inp: ReplayInput):
        s = self.settings
        if self.kind == "training":
            return base.training_baseline(inp, s.interruption_rate, s.recovery_s, s.queue_unmet, self.seed)
        return base.inference_baseline(inp, s.cold_start_s, s.metrics_lag_s)

    def peers(self, inp: ReplayInput) -> dict[str, tuple[Metrics, dict]]:
        """Every peer policy of :mod:`optimizer.rivals.peers`, replayed alike."""
        s = self.settings
        return replay_peers(inp, self.kind, s.interruption_rate, s.recovery_s, s.queue_unmet, self.seed,
                            s.cold_start_s, s.metrics_lag_s)

    def oracle(self, inp: ReplayInput) -> OracleResult:
        """The perfect-foresight limit on ``inp``'s window (:mod:`optimizer.rivals.perfect_foresight`)."""
        if self.kind == "training":
            return training_oracle(inp)
        return inference_oracle(inp, self.settings.cold_start_s)

    def space(self, tune: ReplayInput, override: dict | None = None) -> Space:
        """The search space; for inference, ``max_replicas`` follows the peak before the tuning window.
        ``override``: bounds that replace the settings' and the short-window rule's (e.g. both inference
        families for the benchmarks' hindsight bound)."""
        # no tuning input: no price book, so no committed layer (optimizer.training.committed)
        if self.kind == "training":
            return training_space({**self.settings.training_bounds.as_dict(), **(override or {})},
                                  tune.price if tune is not None else None,
                                  self.settings.interruption_rate, self.settings.recovery_s)
        d = tune.demand[np.isfinite(tune.demand)]
        past = tune.history_before[np.isfinite(tune.history_before)] if tune.history_before is not None else []
        peak = float(np.max(past)) if len(past) else (float(d.max()) if len(d) else 1.0)
        lead = lead_steps(tune.step_s, self.settings.cold_start_s, self.settings.metrics_lag_s) * tune.step_s
        cover = (cold_steps(tune.step_s, self.settings.cold_start_s) + 1) * tune.step_s
        bounds = self.settings.inference_bounds.as_dict()
        if short_window(tune):  # too short to learn the lookahead family's margin (module docstring)
            bounds["family"] = [f for f in bounds.get("family", ["hpa"]) if f == "hpa"] or ["hpa"]
        return inference_space(peak, {**bounds, **(override or {})}, tune.step_s, lead, cover)


def short_window(tune: ReplayInput) -> bool:
    """The tuning window is shorter than :data:`REFINE_MIN_WINDOW_S` (a day)."""
    return len(tune.times) * tune.step_s < REFINE_MIN_WINDOW_S


@dataclass
class SearchTask:
    """Everything one series' search needs, picklable for the executor."""

    series_id: str
    kind: str
    tune: ReplayInput
    evalw: ReplayInput
    settings: SearchSettings
    seed: int
    notes: list[str]


@dataclass
class SearchOutcome:
    """Per-series result of the policy search (figures on the evaluation window).

    ``params``: the tuned policy; ``recommended`` / ``baseline`` / ``random``:
    replay metrics of the tuned, rule-of-thumb and random-search policies;
    ``tuning``: objectives on the tuning window (USD); ``trials``: one dict per
    evaluation; ``replay``: per step ``series_id, timestamp, demand,
    provisioned_recommended, provisioned_baseline``; ``notes``: stated fallbacks.
    """

    params: dict
    recommended: Metrics
    baseline: Metrics
    random: Metrics | None
    tuning: dict
    trials: list[dict]
    replay: pd.DataFrame
    notes: list[str]
    peers: dict[str, Metrics] | None = None
    oracle: OracleResult | None = None
    recommended_policy: str = "searched"
    searched: Metrics | None = None  # the searched policy's figures when a rival is recommended instead
    quota: QuotaCheck | None = None  # the recommendation held to the pool's quota, when it needs more

    def regret(self) -> dict[str, float]:
        """``cost / oracle cost`` per policy (``baseline``, ``recommended``, each peer); empty without an oracle."""
        if self.oracle is None:
            return {}
        pol = {"baseline": self.baseline, "recommended": self.recommended, **(self.peers or {})}
        return {k: regret(m.cost_usd, self.oracle.cost_usd) for k, m in pol.items()}


@dataclass
class Tuned:
    """The tuning half of one series' search: everything :func:`search_one` decides on the
    tuning window alone, in plain JSON values (:class:`capplan.run.search_cache.SearchCache` stores it).

    ``params``: the tuned policy (before the plan's top-up margin, which comes from the
    evaluation window); ``tuning``: objectives on the tuning window (USD, or the daily
    regret score); ``trials``: one dict per evaluation; ``notes``: the tuning's notes
    (ties, a kept scan, a rival recommended); ``random_params``: the random search's best
    policy (None without one); ``recommended_policy``: ``searched``, ``baseline`` or a peer.
    """

    params: dict
    tuning: dict
    trials: list[dict]
    notes: list[str]
    random_params: dict | None
    recommended_policy: str = "searched"


def tune_key_parts(task: SearchTask) -> tuple:
    """What :func:`tune_policy` depends on: the kind, the tuning window's replay input, the
    settings and the seed (not the evaluation window, the series' name or its input notes).
    Windows start at midnight UTC (:func:`forecasting.backtest.split_windows`), so an hour
    of new data leaves these unchanged and only :func:`evaluate_policy` reruns."""
    return task.kind, task.tune, task.settings, task.seed


def tune_policy(task: SearchTask) -> Tuned:
    """The tuning half of :func:`search_one`: the scan, the Gaussian-process (and random)
    search, the refinement rule and the rivals on ``task.tune`` only (module docstring)."""
    pc = task.settings
    tune = task.tune
    ref_cost = reference_cost(tune)
    pr = PolicyReplay(task.kind, pc, SCENARIO_STREAM)  # the world's scenario: the same for every run seed
    space = pr.space(tune)
    narrowed, why = intermittent_space(task.kind, pc.training_bounds.as_dict(), tune.demand)
    space = scan_grid(narrowed or space, pc.scan_grid)  # intermittent: hourly top-ups only; quick: coarse scan
    target = min(1.0, pc.coverage_target + pc.coverage_margin)
    by = pc.coverage_objective
    evaluate = lambda p: pr.replay(p, tune)[0]  # noqa: E731
    score = selection_score(task.kind, pc.selection_score, tune, target, ref_cost, pc.penalty, by)
    obj = score or (lambda m: objective_value(m, target, ref_cost, pc.penalty, by))
    scan, x_scan = grid_scan(evaluate, space, target, ref_cost, pc.penalty, by, score=score,
                             ties=pc.noise_ties if score is None and not narrowed else "exact")
    start = [x_scan] if x_scan else None
    gp = scan if scan_only(pc, scan) else run_search(evaluate, space, pc.n_calls, task.seed, target, ref_cost,
                                                     pc.penalty, "gp", coverage_by=by, start=start, score=score)
    trials = list(gp.trials)
    tuning = {"gp_objective": gp.best_objective, "baseline_objective": obj(pr.baseline(tune)[0]),
              "reference_cost_usd": ref_cost, "coverage_target_while_tuning": target, "coverage_objective": by,
              "selection_score": pc.selection_score if score else "cost"}
    rnd_params = None
    if pc.random_search:
        rnd = run_search(evaluate, space, pc.n_calls, task.seed, target, ref_cost, pc.penalty, "random",
                         coverage_by=by, start=start, score=score)
        trials += rnd.trials
        tuning["random_objective"] = rnd.best_objective
        rnd_params = rnd.best_params.model_dump()
    notes = ([why] if why else []) + noise_tie_notes(scan.noise_tie)
    if task.kind == "inference" and short_window(tune):
        asked = pc.inference_bounds.as_dict().get("family", ["hpa"])
        notes.append("tuning: the tuning window is shorter than a day, too short to learn the lookahead family's "
                     "headroom from its own errors (optimizer.inference.lookahead); only the HPA family was searched"
                     + ("" if "hpa" in asked else f", overriding the configured inference_bounds.family {asked}"))
    best_params, best_obj, n_tied = gp.best_params, gp.best_objective, gp.n_tied
    gp_bar = anchor_bar = None  # what the refinement is judged on (module docstring); None: the own objectives
    if scan.best_params is not None:
        anchor_obj, anchor_params, anchor_tied = scan.best_objective, scan.best_params, scan.n_tied
        tuning["grid_points"] = len(space.grid_points())
        anchor_bar = scan.robust_objective
        gp_bar = neighbour_objective(evaluate, space, space.to_point(gp.best_params.model_dump()), target, ref_cost,
                                     pc.penalty, by, score)
        tuning["anchor_neighbour_objective"], tuning["gp_neighbour_objective"] = anchor_bar, gp_bar
    else:
        n_anchor = min(len(space.anchor_points()), len(gp.trials))
        k = min(range(n_anchor), key=lambda i: gp.trials[i]["objective"]) if n_anchor else None
        anchor_obj = gp.trials[k]["objective"] if k is not None else None
        anchor_params = pr.params(gp.trials[k]["params"]) if k is not None else None
        anchor_tied = 1
    if anchor_obj is not None:
        tuning["anchor_objective"] = anchor_obj
        tuning["refinement_usd"] = anchor_obj - gp.best_objective
        # the refinement must pay for itself: below REFINE_MIN of the anchor's objective the anchor
        # (a function of the forecasts and prices only) is kept, so the seed cannot move the plan
        a_bar = anchor_obj if anchor_bar is None else anchor_bar
        g_bar = gp.best_objective if gp_bar is None else gp_bar
        kept = gp.best_objective < anchor_obj - REFINE_MIN * abs(anchor_obj) and g_bar < a_bar - REFINE_MIN * abs(a_bar)
        if kept and len(tune.times) * tune.step_s < REFINE_MIN_WINDOW_S:
            kept = False
            notes.append("tuning: the tuning window is shorter than a day, too short to tell the Gaussian-process "
                         "refinement's gain from noise; the scan's (or anchor's) policy was kept")
        tuning["refinement_kept"] = bool(kept)
        if not kept:
            best_params, best_obj, n_tied = anchor_params, anchor_obj, anchor_tied
    if n_tied > 1:
        notes.append(f"tuning: {n_tied} policies scored the same objective on the tuning window "
                     f"({best_obj:,.2f} USD; e.g. no demand to tell them apart); the one with the "
                     "highest coverage, then the lowest cost, then the safest was chosen (training: an hourly "
                     "top-up, the smallest weekly reservation, higher quantiles; inference: pre-scaling, a lower "
                     "HPA target)")
    rule, why_not = incumbent_for(task.kind, pc, score is None, tune.day_calibrated is not None, tune.price)
    notes += [why_not] if why_not else []
    if rule is not None:  # the calibrated rule stays unless the search beats it by more than the days' noise
        days = lambda m: daily_objectives(m, pc.coverage_target, ref_cost, pc.penalty)  # noqa: E731
        ch = challenge(best_params, evaluate(best_params), rule, evaluate, days)
        best_params, best_obj, _ = ch.params, ch.objective, notes.append(ch.note)
        tuning.update(incumbent_objective=ch.incumbent_objective, incumbent_kept=ch.incumbent_kept, day_by_day={
            "rule": ch.incumbent_objective, "searched": ch.searched_objective, "margin": ch.margin})
    chosen = "searched"
    rival_metrics = {"baseline": pr.baseline(tune)[0], **{n: m for n, (m, _) in pr.peers(tune).items()}}
    for name in rival_metrics:  # a rival the exports can express is judged as exported (optimizer.rivals.expressed)
        ex = expressed_params(name, task.kind, best_params.model_dump())
        rival_metrics[name] = pr.replay(pr.params(ex), tune)[0] if ex else rival_metrics[name]
    rivals = {"baseline": tuning["baseline_objective"]}
    for name, m in rival_metrics.items():
        if name != "baseline":
            rivals[name] = tuning[f"{name}_objective"] = obj(m)
    best_rival = min(rivals, key=rivals.get)
    # a training pool's rival must win by more than the days' noise (optimizer.rivals.judge; USD objectives only);
    # inference services keep the plain comparison, where a tie goes to the rival (module docstring)
    weekly = isinstance(score, WeeklyScore)  # its margin in units of a week's limit (optimizer.search.selection)
    margin = (rival_margin(pr.replay(best_params, tune)[0], rival_metrics[best_rival])
              if (score is None or weekly) and task.kind == "training" and rule is None else 0.0)
    margin = score.regret_margin(margin) if weekly else margin
    if rule is not None:  # beside the rule the rivals are judged day by day too (optimizer.rivals.incumbent)
        best_obj, rivals, best_rival, margin = days_totals(ch.metrics, rival_metrics, days)
        target = pc.coverage_target
        tuning["day_by_day"].update(rivals, rival_margin=margin, target=target)  # what the decision used
    tuning["rival_margin"] = margin
    unit = ("USD" + (" day by day" if rule is not None else "") if score is None
            else "(worst-week regret)" if weekly else "(daily regret score)")
    tol = 1e-9 * max(1.0, abs(best_obj))
    tied = task.kind == "inference" and rivals[best_rival] <= best_obj + tol  # a tie goes to the rival (docstring)
    if rival_wins(best_obj, rivals[best_rival], margin) or tied:
        carried = expressible(best_rival, task.kind)  # what the exports cannot carry is not recommended
        chosen = best_rival if carried else "searched"
        verb = "matched" if rivals[best_rival] >= best_obj - tol else "beat"
        notes.append(f"policy: the {best_rival} policy {verb} the {kept_name(tuning)} on the tuning window (objective "
                     f"{rivals[best_rival]:,.2f} vs {best_obj:,.2f} {unit} at coverage target {target:.2f}), "
                     + ("so it is recommended; the exports carry it as the policy that expresses it "
                        "(optimizer.rivals.expressed)" if carried else
                        f"but the exports cannot express it, so the {kept_name(tuning)} stays the recommendation "
                        f"(what the exports carry); the {best_rival} row shows the rival's own figures"))
    elif rivals[best_rival] < best_obj - tol:
        notes.append(f"policy: the {best_rival} policy was cheaper on the tuning window (objective "
                     f"{rivals[best_rival]:,.2f} vs {best_obj:,.2f} {unit}) by less than the days' noise "
                     f"({margin:,.2f}; optimizer.rivals.judge), "
                     f"{RULE_KEPT if tuning.get('incumbent_kept') else SEARCHED_KEPT}")
    if weekly:  # the week-to-week spread and the walk-forward check (optimizer.search.multiweek)
        tuning["weeks"] = score.report(rival_metrics[chosen] if chosen != "searched" else evaluate(best_params))
    return Tuned(best_params.model_dump(), tuning, trials, notes, rnd_params, chosen)


def evaluate_policy(task: SearchTask, tuned: Tuned) -> SearchOutcome:
    """The evaluation half of :func:`search_one`: replay the tuned, random-search, baseline
    and peer policies and the perfect-foresight limit on ``task.evalw``, which the tuning
    never saw. ``notes`` = the task's input notes, then the tuning's."""
    pr = PolicyReplay(task.kind, task.settings, SCENARIO_STREAM)
    evalw = task.evalw
    best_params = pr.params(tuned.params)
    best_params = with_plan_terms(best_params, evalw)  # the calibrated levels' latest margin and errors
    rnd_eval = pr.replay(pr.params(tuned.random_params), evalw)[0] if tuned.random_params is not None else None
    rec, rec_series = pr.replay(best_params, evalw)
    bl, bl_series = pr.baseline(evalw)
    peers_eval = pr.peers(evalw)
    chosen, searched = tuned.recommended_policy, None
    if chosen != "searched" and not expressible(chosen, task.kind):  # a stored tuning from before that rule
        chosen = "searched"
    if chosen != "searched":  # a rival the exports express is recommended as that policy (optimizer.rivals.expressed)
        searched = rec
        ex = expressed_params(chosen, task.kind, best_params.model_dump())
        best_params = pr.params(ex) if ex else best_params
        rec, rec_series = pr.replay(best_params, evalw) if ex else \
            (bl, bl_series) if chosen == "baseline" else peers_eval[chosen]
    replay = pd.DataFrame({"series_id": task.series_id, "timestamp": evalw.times, "demand": evalw.demand,
                           "provisioned_recommended": rec_series["provisioned"],
                           "provisioned_baseline": bl_series["provisioned"]})
    quota, checked = purchase_check(evalw, rec, rec_series, recommended_replay(pr, chosen, best_params), task.settings,
                                    tuned.params if chosen == "searched" else None)  # optimizer.book.purchase_check
    return SearchOutcome(best_params.model_dump(), rec, bl, rnd_eval, dict(tuned.tuning), list(tuned.trials), replay,
                         list(task.notes) + list(tuned.notes) + checked,
                         peers={k: m for k, (m, _) in peers_eval.items()},
                         oracle=pr.oracle(evalw), recommended_policy=chosen, searched=searched, quota=quota)


def search_one(task: SearchTask) -> SearchOutcome:
    """Tune one series on its tuning window (:func:`tune_policy`); replay the tuned, random-search,
    baseline and peer policies on its evaluation window (:func:`evaluate_policy`)."""
    return evaluate_policy(task, tune_policy(task))


def policy_warnings(oc: SearchOutcome, coverage_target: float) -> list[str]:
    """Say so when the recommendation is not better than the rule of thumb on the
    evaluation window (coverage below ``min(coverage_target, baseline's)``, or a
    cheaper baseline)."""
    out = []
    r, b = oc.recommended, oc.baseline
    need = min(coverage_target, b.coverage) if b.coverage == b.coverage else coverage_target
    if r.coverage == r.coverage and r.coverage < need - 1e-9:
        out.append(f"policy: recommended coverage {r.coverage:.3f} is below the target {need:.3f} on the "
                   "evaluation window; demand left the range of the tuning window")
    if b.cost_usd > 0 and r.cost_usd > b.cost_usd * 1.0001:
        out.append(f"policy: the baseline is cheaper on the evaluation window ({b.cost_usd:,.0f} vs "
                   f"{r.cost_usd:,.0f} USD)")
    return out
