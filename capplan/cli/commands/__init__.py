"""Subcommands. Each module has ``register(app)``; add new ones to COMMANDS."""

from capplan.cli.commands import backtest, dashboard, discover, export, ingest, plan, serve

COMMANDS = [plan, backtest, ingest, export, dashboard, discover, serve]
