"""From tuned parameters to what is exported: the policy parameters and per-series plan (:mod:`.policy`),
capacity per lead time from the 7-day forecast (:mod:`.capacity`), and the history levels the manifests
quote.
"""
