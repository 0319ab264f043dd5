"""History in, forecasts out: regularising, the three tiers, calendars,
combining and backtests. This package imports nothing of capplan's and does no
network I/O.
"""
