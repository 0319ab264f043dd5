"""Checks of command-line options that run before any work (no data read, no
heavy import), so a typo costs milliseconds and exits 2 with one line."""

from __future__ import annotations

from capplan.errors import InputError


def check_timezone(name: str, option: str = "--timezone") -> str:
    """Return ``name`` if it is an IANA time zone known to this system (``zoneinfo``).

    Raises InputError naming the option, e.g. ``--timezone 'Mars/Olympus': unknown
    time zone; use an IANA name such as UTC or Asia/Shanghai``.
    """
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(f"{option} {name!r}: unknown time zone; use an IANA name such as UTC, "
                         "Europe/Berlin or Asia/Shanghai") from None
    return name
