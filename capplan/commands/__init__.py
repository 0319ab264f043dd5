"""Subcommands. Each module has ``register(app)``; add new ones to COMMANDS."""

from capplan.commands import export, ingest, plan

COMMANDS = [plan, ingest, export]
