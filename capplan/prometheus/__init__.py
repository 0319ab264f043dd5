"""The HTTP side of reading a Prometheus-compatible store: the retried ``query_range`` client, parsing and
checking answers, which steps held demand, and discovery of what to plan. The ``prometheus`` source
(:mod:`capplan.sources.prometheus`) and ``capplan discover`` use it.
"""
