"""A run of the pipeline: the stage lists (:mod:`.pipeline`), what stages hand to each other (:mod:`.state`),
the stages themselves (:mod:`.stages`), the executors that map work over series, and the caches reused
between runs on one store.
"""
