"""Backtests of a stored or fresh run: the walk-forward policy backtest (``capplan backtest --policies``,
one replay per complete week before the evaluation window) and the what-if replays of the dashboard.
"""
