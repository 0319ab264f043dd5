"""Benchmark: the sample fleet's regret with spot capped, against uncapped, and the committed layer bought instead.

Run: ``python -m benchmarks spot-cap [--forecasts OUT_DIR] [--share 0.5] [--gpus 32] [--series ID ...] [--seed N]
[--source SRC --timezone TZ] [--config capplan.yaml]``.

The search stage (:func:`benchmarks.common.search_outcomes`) runs three times on the same
forecasts: with the configured price book (by default no spot cap), with every GPU model's
``spot_cap_share`` set to ``--share`` (0.5: at most half of the GPUs bought in any step on spot),
and with every GPU model's ``spot_cap_gpus`` set to ``--gpus`` (a cap by GPU count, which refuses
much of a large pool's spot and none of a small one's; 0 skips it); :mod:`optimizer.book.purchase`.
Each capped run re-tunes the policies under its cap, with the committed layer's reservation
levels in the scan (:mod:`optimizer.training.committed`). Per training pool it prints each run's
recommended cost, perfect-foresight cost (the limit under the same book:
:func:`optimizer.rivals.perfect_foresight.training_oracle` honours the cap), regret, coverage and the purchase mix
(share of GPU-hours reserved / spot / on demand: the layers bought instead of spot), then per
group of pools the fleet regret of each run (Σ cost ÷ Σ perfect-foresight cost) and the ratio
capped ÷ uncapped. Groups: the pools settings are chosen on, and the held-out pools
(:data:`HELD_OUT`), reported apart. Target: on the first group, the regret at the ``--share``
cap within 10 % of the uncapped one's (:data:`TARGET`).

Forecasts: ``--forecasts DIR`` reuses a ``capplan plan`` folder's combined forecasts (e.g. the
baseline plan); without it the forecast stage runs once (several minutes).
"""

from __future__ import annotations

import time

from benchmarks import common
from capplan.config.settings import CapplanConfig, load_config
from optimizer.book.purchase import MIX_LAYERS, spot_share

TARGET = 1.10  # capped fleet regret / uncapped fleet regret, at the --share cap, on the pools not held out
#: the sample's pools no setting is chosen on (their figures are reported apart)
HELD_OUT = ("train/vc8Sj", "train/vcJLV", "train/vcTJs", "train/vchbv")


def capped_config(cfg: CapplanConfig, share: float | None = None, gpus: float | None = None) -> CapplanConfig:
    """``cfg`` with every price book entry's ``spot_cap_share`` set to ``share`` (0-1) and
    ``spot_cap_gpus`` to ``gpus`` (GPUs), each where given."""
    upd = {k: v for k, v in (("spot_cap_share", share), ("spot_cap_gpus", gpus)) if v is not None}
    book = {k: v.model_copy(update=upd) for k, v in cfg.price_book().items()}
    return cfg.model_copy(update={"prices": book})


def fleet(outcomes: dict, kinds: dict, pools=None) -> tuple[float, float]:
    """``(Σ recommended cost, Σ perfect-foresight cost)`` over the training pools (those in
    ``pools`` when given), USD."""
    got = [o for s, o in outcomes.items() if kinds[s] == "training" and o.oracle and (pools is None or s in pools)]
    return sum(o.recommended.cost_usd for o in got), sum(o.oracle.cost_usd for o in got)


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
    ap.add_argument("--share", type=float, default=0.5,
                    help="spot cap as a share (0-1) of the GPUs bought (default 0.5)")
    ap.add_argument("--gpus", type=float, default=32.0,
                    help="spot cap in GPUs for the third run (default 32; 0 skips it)")
    a = ap.parse_args(argv)
    if not 0 <= a.share <= 1:
        ap.error("--share must be within 0-1")
    if a.gpus < 0:
        ap.error("--gpus must be 0 (skip) or more")
    cfg = load_config(a.config) if a.config else CapplanConfig()
    state = common.with_forecasts(common.loaded_state(cfg, a.source, a.series, a.timezone, a.seed), a.forecasts)
    kinds = {s: m.kind for s, m in state.prep.meta.items()}
    books = [("uncapped", cfg), (f"spot <= {a.share:g}", capped_config(cfg, share=a.share))]
    if a.gpus > 0:
        books.append((f"spot <= {a.gpus:g} GPUs", capped_config(cfg, gpus=a.gpus)))
    runs = {}
    for label, c in books:
        t = time.perf_counter()
        state.cfg = c
        runs[label] = common.search_outcomes(state, a.seed)
        print(f"search ({label}): {time.perf_counter() - t:.0f} s")
    ou = runs["uncapped"]
    print(f"\n{'pool':16} {'run':18} {'cost USD':>10} {'limit USD':>10} {'regret':>7} {'coverage':>8}  "
          "mix % reserved / spot / on demand (GPU-hours)")
    for sid in sorted(s for s in ou if kinds[s] == "training" and all(s in o for o in runs.values())):
        for label, o in runs.items():
            r = o[sid].recommended
            lim = o[sid].oracle.cost_usd if o[sid].oracle else float("nan")
            print(f"{sid:16} {label:18} {r.cost_usd:10,.0f} {lim:10,.0f} "
                  f"{r.cost_usd / lim if lim else float('nan'):7.3f} {r.coverage:8.3f}  {_mix(r)}"
                  + (f"  (spot refused {r.spot_refused_gpu_hours:,.0f} GPU-h)" if r.spot_refused_gpu_hours else ""))
    tuned = sorted(s for s in ou if kinds[s] == "training" and s not in HELD_OUT)
    held = sorted(s for s in ou if kinds[s] == "training" and s in HELD_OUT)
    ratios = {}
    for group, pools in ((f"pools settings are chosen on ({len(tuned)})", tuned),
                         (f"held-out pools ({len(held)}: {', '.join(s.split('/')[-1] for s in held)})", held)):
        if not pools:
            continue
        print(f"\nfleet regret (Σ cost / Σ perfect-foresight cost), {group}:")
        cu, lu = fleet(ou, kinds, pools)
        for label, o in runs.items():
            c, lim = fleet(o, kinds, pools)
            share = max((spot_share(o[s].recommended.mix) or 0.0 for s in pools), default=0.0)
            res = sum(o[s].recommended.mix["reserved"]["gpu_hours"] for s in pools if o[s].recommended.mix)
            tail = "" if label == "uncapped" else f"; capped / uncapped regret {(c / lim) / (cu / lu):.3f}"
            print(f"  {label:18} {c / lim:.3f}  ({c:,.0f} / {lim:,.0f} USD), largest spot share {share:.2f}, "
                  f"reserved {res:,.0f} GPU-h{tail}")
            ratios.setdefault(pools is tuned, {})[label] = (c / lim) / (cu / lu)
    if tuned:
        r = ratios[True][f"spot <= {a.share:g}"]
        print(f"\ntarget: at a {a.share:.0%} spot cap, the fleet regret of the pools settings are chosen on within "
              f"{100 * (TARGET - 1):.0f} % of the uncapped: {'met' if r <= TARGET else 'NOT met'} ({r:.3f})")


if __name__ == "__main__":
    main()
