"""Config values a trusted tool refuses at their key: series ids with control characters (as the CSV
reader does), prices that overflow and reservation terms no cloud sells."""

from __future__ import annotations

import pytest

from capplan.config.settings import load_config
from capplan.errors import InputError


@pytest.mark.parametrize("sid", ["train/a\\nb", "train/a\\tb", "train/\\u001b[31mred", "  train/a"])
def test_series_id_with_control_characters_is_refused(tmp_path, sid):
    p = tmp_path / "capplan.yaml"
    p.write_text(f'series:\n  - id: "{sid}"\n    query: sum(x)\n')
    with pytest.raises(InputError) as ei:
        load_config(p)
    msg = str(ei.value)
    assert "series[0].id" in msg and "control characters" in msg and "\x1b" not in msg and "\n" not in msg


@pytest.mark.parametrize("key,value", [("on_demand", "1e308"), ("spot", "1e308"), ("reserved", "20000"),
                                       ("reserved_min_term_days", "1e9")])
def test_price_book_bounds_are_named_at_the_key(tmp_path, key, value):
    entry = {"on_demand": "4.1", "reserved": "2.5", "spot": "1.6", key: value}
    p = tmp_path / "capplan.yaml"
    p.write_text("prices:\n  A100-80GB:\n" + "".join(f"    {k}: {v}\n" for k, v in entry.items()))
    with pytest.raises(InputError) as ei:
        load_config(p)
    assert f"prices.A100-80GB.{key}" in str(ei.value) and "less than or equal" in str(ei.value)


def test_ordinary_values_still_load(tmp_path):
    p = tmp_path / "capplan.yaml"
    p.write_text("series:\n  - id: train/team-a\n    query: sum(x)\nprices:\n  A100-80GB: {on_demand: 4.1, "
                 "reserved: 2.5, spot: 1.6, reserved_min_term_days: 365}\n")
    cfg = load_config(p)
    assert cfg.series[0].id == "train/team-a" and cfg.prices["A100-80GB"].reserved_min_term_days == 365
