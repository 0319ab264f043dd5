"""Persistence: the local store (history per series, results per run), atomic writes, a full disk said as
such, object stores (``s3://``, ``gs://``, ``file://``), run ids, the ``LATEST`` pointer and retention.
"""
