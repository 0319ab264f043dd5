"""Error types and the CLI exit codes they map to.

* :class:`InputError` — bad input from the user (file, column, row, option,
  config). The CLI prints its one-line message and exits with code 2.
* Any other exception is an internal failure: exit code 1.
* ``capplan plan`` exits 3 when some series failed in their own task (listed
  under ``failed`` in ``report.json``) and every other series was planned.
* Ctrl-C ends any command with one line and exit code 130 (128 + SIGINT).
"""

from __future__ import annotations

import re

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_PARTIAL = 3  # capplan plan: some series failed on their own (report.json: failed); the rest was planned
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + 2, as shells report it; one line on stderr, no traceback


class CapplanError(Exception):
    """Base class of capplan's own errors."""


class InputError(CapplanError):
    """The user's input cannot be used.

    The message names the input (file, column, row, option or config key) and,
    where it helps, says what to do. The CLI maps it to exit code 2.
    """


class SourceError(CapplanError):
    """A data source (e.g. Prometheus) failed in a way that retrying did not fix.

    The message names the series id and query, never a credential.
    """


_WORD = r"[A-Za-z]{1,15}[0-9]{0,4}"  # one part of a name: letters, then a few digits (``p95``, ``value2``)


def looks_like_name(text: str) -> bool:
    """True when ``text`` looks like a config key, a column or an environment variable name, so an
    error may show it: at most 40 characters of ``_``-separated words, each a run of up to 15
    letters and then up to 4 digits (``reservaton_ratio``, ``Timestamp``, ``CAPPLAN_PROM_TOKEN``).
    Anything else read from a file or a config value may be a secret (a password file's first
    line parses as one long key or column name; a token pasted where a variable's name belongs:
    ``ghp_16C7e42F...``, ``AKIAIOSFODNN7EXAMPLE``, a JWT) and is never shown (README, "Exit codes")."""
    return len(text) <= 40 and re.fullmatch(rf"_*{_WORD}(_+{_WORD})*_*", text) is not None
