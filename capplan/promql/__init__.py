"""PromQL for demand: the named templates (DCGM, kube-state-metrics, Kueue, Volcano), their rendering with
escaped label matchers, and what one stored step of a series means.
"""
