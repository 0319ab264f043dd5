"""The capplan Streamlit planning dashboard (``capplan dashboard``).

``APP`` is the path of the entry script that ``streamlit run`` starts; the pages
live in ``views/`` and import :mod:`capplan` only (README, "Layout").
"""

from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"
