"""Subcommands. Each module has ``register(app)``; add new ones to COMMANDS."""

from capplan.commands import dashboard, plan

COMMANDS = [plan, dashboard]
