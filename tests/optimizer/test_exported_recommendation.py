"""What is exported is what is recommended: a recommended inference peer is the policy that expresses it
(optimizer.peers.exported_params), and the exported parameters replay to the recommended figures."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.peers import PEERS, exported_params, replay_peers
from optimizer.policy import InferenceParams
from optimizer.replay import replay_inference
from optimizer.search_settings import SearchSettings
from optimizer.tuning import PolicyReplay, SearchTask, Tuned, evaluate_policy, search_one
from tests.optimizer.test_lookahead import inp

SEARCHED = {"target_utilization": 0.8, "min_replicas": 3, "max_replicas": 60, "scale_down_window_s": 300,
            "family": "hpa", "data_step_s": 300, "lookahead_lead_s": 900, "lookahead_cover_s": 600, "period_s": 60}


def _daily(n_days: int, seed: int = 0) -> np.ndarray:
    t = np.arange(n_days * 288)
    rng = np.random.default_rng(seed)
    return np.round(10 + 6 * np.sin(2 * np.pi * t / 288) + rng.normal(0, 1.0, len(t))).clip(1)


def test_inference_peers_have_an_expression_that_keeps_the_fixed_fields():
    for name in PEERS:
        ex = exported_params(name, "inference", SEARCHED)
        p = InferenceParams(**ex)  # a valid policy the exporters render
        assert p.max_replicas == 60 and p.data_step_s == 300 and p.lookahead_lead_s == 900
        assert exported_params(name, "training", {"reservation_ratio": 0.0}) is None
    assert exported_params("baseline", "inference", SEARCHED) is None
    assert InferenceParams(**exported_params("naive_conformal", "inference", SEARCHED)).family == "lookahead"


@pytest.mark.parametrize("name", sorted(PEERS))
def test_an_expressed_peer_behaves_like_the_peer(name):
    # on a daily cycle the expression's replay is close to the peer's own rule (the HPA's tolerance and
    # the steps already decided are all that differ)
    d, before = _daily(3, 1), _daily(7, 2)
    w = inp(d, before=before)
    peer = replay_peers(w, "inference")[name][0]
    ex = replay_inference(w, InferenceParams(**exported_params(name, "inference", SEARCHED)))[0]
    assert ex.coverage == pytest.approx(peer.coverage, abs=0.08)
    assert ex.cost_usd == pytest.approx(peer.cost_usd, rel=0.15)


@pytest.mark.parametrize("chosen", ["searched", "naive_conformal", "reactive"])
def test_the_exported_parameters_replay_to_the_recommended_figures(chosen):
    tune, evalw = inp(_daily(2, 3), before=_daily(7, 4)), inp(_daily(2, 5), before=_daily(9, 4))
    task = SearchTask("infer/s", "inference", tune, evalw, SearchSettings(n_calls=4, random_search=False), 0, [])
    oc = evaluate_policy(task, Tuned(dict(SEARCHED), {}, [], [], None, chosen))
    assert oc.recommended_policy == chosen
    again = PolicyReplay("inference", task.settings, 0).replay(InferenceParams(**oc.params), evalw)[0]
    assert again.cost_usd == pytest.approx(oc.recommended.cost_usd) and again.coverage == oc.recommended.coverage
    if chosen != "searched":
        assert oc.searched is not None and oc.params != SEARCHED


def test_every_searched_series_exports_what_it_recommends():
    # the whole search on a short window, whichever policy wins: the exported params replay to the figures
    tune, evalw = inp(_daily(1, 6), before=_daily(7, 7)), inp(_daily(1, 8), before=_daily(8, 7))
    oc = search_one(SearchTask("infer/s", "inference", tune, evalw, SearchSettings(n_calls=4, random_search=False),
                               0, []))
    again = PolicyReplay("inference", SearchSettings(), 0).replay(InferenceParams(**oc.params), evalw)[0]
    assert again.cost_usd == pytest.approx(oc.recommended.cost_usd) and again.coverage == oc.recommended.coverage
