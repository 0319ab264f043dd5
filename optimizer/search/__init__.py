"""Policy search: the typed search spaces, the objective, Bayesian (scikit-optimize), random and grid search,
per-series tuning on the tuning window, multi-week selection and the ranking of ties within noise.
"""
