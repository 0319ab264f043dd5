"""File-name keys of series ids: safe, bounded and never hidden.

Every file or folder name built from a series id (the store's history files,
the model registry's folders, per-series job files) goes through
:func:`file_key`:

* the id is percent-encoded with no safe characters (``/`` -> ``%2F``), so it
  never names another folder;
* a leading dot is encoded too (``.`` -> ``%2E``), so ``.``, ``..`` and
  ``.team`` are ordinary names, never the current or parent folder nor a
  hidden file that listings skip;
* a key longer than :data:`MAX_KEY` characters keeps a readable prefix and
  ends with ``~`` and 32 hex digits of the id's SHA-256, so a 300-character
  id fits the 255-byte limit of common file systems with room for suffixes
  such as ``.backtest.parquet``.

Short keys decode back with :func:`urllib.parse.unquote`; hashed keys do not,
so stores keep the id itself beside the data (``<key>.json``'s
``series_id``).
"""

from __future__ import annotations

import hashlib
from urllib.parse import quote

MAX_KEY = 150
"""Longest key in characters (file systems allow 255 bytes; suffixes need room)."""


def file_key(series_id: str) -> str:
    """The file-name key of ``series_id`` (see the module docstring)."""
    key = quote(str(series_id), safe="")
    if key.startswith("."):
        key = "%2E" + key[1:]
    if len(key) > MAX_KEY:
        digest = hashlib.sha256(str(series_id).encode("utf-8")).hexdigest()[:32]
        head = key[:MAX_KEY - 33]
        cut = head.rfind("%", len(head) - 2)  # never end the prefix inside a %XX escape
        key = (head[:cut] if cut >= 0 else head) + "~" + digest
    return key
