"""Where the published JSON schemas are (``schemas/`` of a checkout, ``capplan/_schemas`` of a wheel)."""

from __future__ import annotations

from pathlib import Path


def default_schemas_dir() -> Path:
    """The schema folder: ``capplan/_schemas`` in an installed wheel (a sibling
    package of ``optimizer``), else ``schemas/`` of the checkout. Located from
    this file's path, so ``optimizer`` never imports ``capplan``."""
    root = Path(__file__).resolve().parents[3]
    packaged = root / "capplan" / "_schemas"
    if packaged.is_dir():
        return packaged
    return root / "schemas"
