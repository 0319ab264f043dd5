"""Benchmark: the sample fleet's regret with spot capped at a share of the capacity bought, against uncapped.

Run: ``python -m benchmarks spot-cap [--forecasts OUT_DIR] [--share 0.5] [--series ID ...] [--seed N]
[--source SRC --timezone TZ] [--config capplan.yaml]``.

The search stage (:func:`benchmarks.common.search_outcomes`) runs twice on the same forecasts:
with the configured price book (by default no spot cap) and with every GPU model's
``spot_cap_share`` set to ``--share`` (0.5: at most half of the GPUs bought in any step on spot;
:mod:`optimizer.purchase`), the policies re-tuned under the cap. Per training pool it prints both
runs' recommended cost, perfect-foresight cost (the limit under the same book:
:func:`optimizer.oracle.training_oracle` honours the cap), regret, coverage and the purchase mix
(share of GPU-hours reserved / spot / on demand: the layers bought instead of spot), then the
fleet regret of each (Σ cost ÷ Σ perfect-foresight cost over the training pools) and the target:
the capped fleet regret within 10 % of the uncapped one's.

Forecasts: ``--forecasts DIR`` reuses a ``capplan plan`` folder's combined forecasts (e.g. the
baseline plan); without it the forecast stage runs once (several minutes).
"""

from __future__ import annotations

import time

from benchmarks import common
from capplan.config import CapplanConfig, load_config
from optimizer.purchase import MIX_LAYERS, spot_share

TARGET = 1.10  # capped fleet regret / uncapped fleet regret


def capped_config(cfg: CapplanConfig, share: float) -> CapplanConfig:
    """``cfg`` with every price book entry's ``spot_cap_share`` set to ``share`` (0-1)."""
    book = {k: v.model_copy(update={"spot_cap_share": share}) for k, v in cfg.price_book().items()}
    return cfg.model_copy(update={"prices": book})


def fleet(outcomes: dict, kinds: dict) -> tuple[float, float]:
    """``(Σ recommended cost, Σ perfect-foresight cost)`` over the training pools, USD."""
    cost = sum(o.recommended.cost_usd for s, o in outcomes.items() if kinds[s] == "training" and o.oracle)
    limit = sum(o.oracle.cost_usd for s, o in outcomes.items() if kinds[s] == "training" and o.oracle)
    return cost, limit


def _mix(m) -> str:
    if not m.mix:
        return "mix not recorded"
    total = sum(m.mix[k]["gpu_hours"] for k in MIX_LAYERS) or 1.0
    return " / ".join(f"{100 * m.mix[k]['gpu_hours'] / total:3.0f}" for k in MIX_LAYERS)


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "spot-cap")
    common.add_source(ap)
    common.add_series(ap)
    common.add_seed(ap)
    common.add_forecasts(ap)
    common.add_config(ap)
    ap.add_argument("--share", type=float, default=0.5, help="spot cap as a share (0-1) of the GPUs bought (default 0.5)")
    a = ap.parse_args(argv)
    if not 0 <= a.share <= 1:
        ap.error("--share must be within 0-1")
    cfg = load_config(a.config) if a.config else CapplanConfig()
    state = common.with_forecasts(common.loaded_state(cfg, a.source, a.series, a.timezone, a.seed), a.forecasts)
    kinds = {s: m.kind for s, m in state.prep.meta.items()}
    runs = {}
    for label, c in (("uncapped", cfg), (f"spot <= {a.share:g}", capped_config(cfg, a.share))):
        t = time.perf_counter()
        state.cfg = c
        runs[label] = common.search_outcomes(state, a.seed)
        print(f"search ({label}): {time.perf_counter() - t:.0f} s")
    (lu, ou), (lc, oc) = runs.items()
    print(f"\n{'pool':16} {'run':14} {'cost USD':>10} {'limit USD':>10} {'regret':>7} {'coverage':>8}  "
          "mix % reserved / spot / on demand (GPU-hours)")
    for sid in sorted(s for s in ou if kinds[s] == "training" and s in oc):
        for label, o in ((lu, ou[sid]), (lc, oc[sid])):
            r = o.recommended
            lim = o.oracle.cost_usd if o.oracle else float("nan")
            print(f"{sid:16} {label:14} {r.cost_usd:10,.0f} {lim:10,.0f} {r.cost_usd / lim if lim else float('nan'):7.3f} "
                  f"{r.coverage:8.3f}  {_mix(r)}" + (f"  (spot refused {r.spot_refused_gpu_hours:,.0f} GPU-h)"
                                                      if r.spot_refused_gpu_hours else ""))
    (cu, lim_u), (cc, lim_c) = fleet(ou, kinds), fleet(oc, kinds)
    ru, rc = cu / lim_u, cc / lim_c
    su = [spot_share(o.recommended.mix) or 0.0 for s, o in ou.items() if kinds[s] == "training"]
    sc = [spot_share(o.recommended.mix) or 0.0 for s, o in oc.items() if kinds[s] == "training"]
    print(f"\nfleet regret (Σ cost / Σ perfect-foresight cost), training pools:")
    print(f"  {lu:14} {ru:.3f}  ({cu:,.0f} / {lim_u:,.0f} USD), largest spot share {max(su, default=0):.2f}")
    print(f"  {lc:14} {rc:.3f}  ({cc:,.0f} / {lim_c:,.0f} USD), largest spot share {max(sc, default=0):.2f}")
    print(f"  capped / uncapped regret {rc / ru:.3f}; cost {cc / cu:.3f}")
    print(f"target: capped fleet regret within {100 * (TARGET - 1):.0f} % of the uncapped: "
          f"{'met' if rc <= TARGET * ru else 'NOT met'} ({rc / ru:.3f})")


if __name__ == "__main__":
    main()
