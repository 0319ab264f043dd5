"""Error types and the CLI exit codes they map to.

* :class:`InputError` — bad input from the user (file, column, row, option,
  config). The CLI prints its one-line message and exits with code 2.
* Any other exception is an internal failure: exit code 1.
* ``capplan plan`` exits 3 when some series failed in their own task (listed
  under ``failed`` in ``report.json``) and every other series was planned.
"""

from __future__ import annotations

import re

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_PARTIAL = 3  # capplan plan: some series failed on their own (report.json: failed); the rest was planned


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


def looks_like_name(text: str) -> bool:
    """True when ``text`` looks like a config key or a column name (a letter or ``_``, then up to 39
    letters, digits or ``_``), so an error may show it. Anything else read from a file may be its
    content (a password file's first line parses as one long key or column name) and is never shown
    (README, "Exit codes")."""
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,39}", text) is not None
