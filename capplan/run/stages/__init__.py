"""The stages of a run, one module each; their order is :mod:`capplan.run.pipeline`'s.

Every stage is a function ``stage(state: capplan.run.state.PlanState) -> None``; each module
holds its stage and the tasks it submits to the executor (:mod:`capplan.run.executor`):

* :mod:`.load` — a source -> regularised history and windows (:func:`.load.load`);
* :mod:`.forecast` — every model's rolling-origin and plan forecasts (:func:`.forecast.forecast`);
* :mod:`.combine` — combined and calibrated forecasts and their scores (:func:`.combine.combine`);
* :mod:`.score` — backtest scores per model and lead band; the peers (:func:`.score.score`, :func:`.score.peers`);
* :mod:`.search` — per series, the policy search on the replay (:func:`.search.search`);
* :mod:`.export` — capacity plans, manifests, ``report.json`` (:func:`.export.export`).
"""
