"""prometheus-adapter rules that serve the HPA's External GPU metric.

Format: the adapter's config file, ``externalRules`` (kubernetes-sigs/
prometheus-adapter, docs/config.md; in the prometheus-community Helm chart the
same list goes under ``rules.external``). One rule per inference service: the
metric ``capplan_gpu_util_<name>`` is the **sum** of ``DCGM_FI_DEV_GPU_UTIL``
(percent, 0–100 per GPU; NVIDIA DCGM field ``DCGM_FI_DEV_GPU_UTIL``) over the
service's pods in the HPA's namespace, one element. A service on the ``lookahead`` family
(:mod:`optimizer.inference.lookahead`) gets a second rule, ``capplan_lookahead_<name>``: the level of that
sum plus the tuned quantile of its errors (:func:`optimizer.inference.lookahead.promql`), in the same unit.
"""

from __future__ import annotations

from optimizer.exporters import predictive
from optimizer.exporters.base import Context, Doc, register
from optimizer.exporters.hpa import external_metric_name, lookahead_metric_name, pod_regex
from optimizer.inference.lookahead import promql
from optimizer.plan.policy import InferenceParams, SeriesPlan

PATH = "adapter/prometheus-adapter-rules.yaml"


def rule(plan: SeriesPlan, ctx: Context) -> dict:
    s = ctx.settings
    t = ctx.target(plan)
    name = ctx.names[plan.series_id]
    return {
        "seriesQuery": f'{s.gpu_metric}{{{s.namespace_label}!="",{s.pod_label}!=""}}',
        "resources": {"overrides": {s.namespace_label: {"resource": "namespace"}}},
        "name": {"matches": f"^{s.gpu_metric}$", "as": external_metric_name(name)},
        "metricsQuery": f'sum(<<.Series>>{{<<.LabelMatchers>>,{s.pod_label}=~"{pod_regex(t.name, t.kind)}"}})',
    }


def lookahead_rule(plan: SeriesPlan, ctx: Context) -> dict:
    """The ``capplan_lookahead_<name>`` rule of a ``lookahead`` service (module docstring)."""
    r = rule(plan, ctx)
    t = ctx.target(plan)
    r["name"] = {"matches": f"^{ctx.settings.gpu_metric}$", "as": lookahead_metric_name(ctx.names[plan.series_id])}
    r["metricsQuery"] = promql(f'sum(<<.Series>>{{<<.LabelMatchers>>,{ctx.settings.pod_label}=~"'
                               f'{pod_regex(t.name, t.kind)}"}})', InferenceParams(**plan.params),
                               ctx.settings.scrape_seconds)
    return r


@register("adapter")
def write(plans: list[SeriesPlan], ctx: Context) -> list[Doc]:
    """One file with an ``externalRules`` entry per inference series (none if there are none)."""
    rules = [rule(p, ctx) for p in plans if p.kind == "inference"]
    rules += [lookahead_rule(p, ctx) for p in plans
              if p.kind == "inference" and InferenceParams(**p.params).family == "lookahead"]
    rules += [predictive.adapter_rule(p, ctx) for p in plans
              if p.kind == "inference" and predictive.uses_predictive(InferenceParams(**p.params), ctx)]
    if not rules:
        return []
    return [Doc(PATH, {"externalRules": rules},
                header="prometheus-adapter config (externalRules; Helm chart: rules.external).\n"
                       "Serves the External metrics the HPAs in manifests/ or alternatives/hpa/ scale on.")]
