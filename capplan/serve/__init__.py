"""``capplan serve``: the store's latest plan as Prometheus metrics and JSON over HTTP (127.0.0.1 unless told).
"""
