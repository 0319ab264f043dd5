"""Subcommands. Each module has ``register(app)``; add new ones to COMMANDS."""

from capplan.commands import backtest, dashboard, export, ingest, plan, serve

COMMANDS = [plan, backtest, ingest, export, dashboard, serve]
