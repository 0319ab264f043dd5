"""A config cannot hang capplan or exhaust its memory, and a value that would fail a later
stage fails at load, naming the config key (capplan.config.yaml_bounds, capplan.config.settings).

Each load runs in a forked child that must answer within the time limit and grow by less
than the memory limit (its peak resident size): an alias bomb
used to take minutes (the duplicate-key check walked every alias again), so a hang
fails the test instead of stalling it."""

from __future__ import annotations

import multiprocessing as mp
import resource
import time

import pytest

from capplan.config.yaml_bounds import MAX_BYTES, MAX_DEPTH, MAX_VALUES
from tests.conftest import run_cli

LIMIT_S = 2.0
LIMIT_BYTES = 200 * 2**20


def _child(path: str, conn) -> None:
    from capplan.config.settings import load_config
    from capplan.errors import InputError

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    try:
        load_config(path)
        msg = None
    except InputError as exc:
        msg = str(exc)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails the test
        msg = f"UNEXPECTED {type(exc).__name__}"
    secs = time.perf_counter() - t0
    conn.send((msg, secs, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024))  # KiB on Linux


def load_bounded(path, limit_s: float | None = LIMIT_S) -> str:
    """The InputError message of loading ``path``; fails unless it comes within the limits
    (``limit_s`` None: only within the hang guard, for a load whose cost is PyYAML's per value)."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(str(path), child))
    proc.start()
    try:
        guard = LIMIT_S * 5 if limit_s is not None else 120  # a hang (minutes on the old code) fails, not stalls
        if not parent.poll(guard):
            pytest.fail(f"loading {path.name} did not finish in {guard:.0f} s")
        msg, secs, peak = parent.recv()
    finally:
        proc.kill()
        proc.join()
    assert msg is not None, f"{path.name} was accepted"
    assert not msg.startswith("UNEXPECTED"), msg
    assert limit_s is None or secs < limit_s, f"{path.name}: {secs:.2f} s"
    assert peak < LIMIT_BYTES, f"{path.name}: {peak / 2**20:.0f} MB"
    return msg


def bomb(levels: int, top: bool = False) -> str:
    """A billion-laughs document: each level an anchored list of nine aliases of the one below."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    if top:
        return "\n".join(lines) + "\n"
    return "\n".join(lines) + f"\nforecast:\n  events: *a{levels}\n"


@pytest.mark.parametrize("levels", [9, 10, 12])
def test_alias_bombs_are_refused_quickly(tmp_path, levels):
    p = tmp_path / "bomb.yaml"
    p.write_text(bomb(levels))
    assert len(p.read_bytes()) < 1000
    msg = load_bounded(p)
    assert f"limit of {MAX_VALUES:,} values" in msg and "aliases" in msg


def test_top_level_alias_bomb_is_refused(tmp_path):
    p = tmp_path / "bomb.yaml"
    p.write_text(bomb(10, top=True))
    assert f"limit of {MAX_VALUES:,} values" in load_bounded(p)


def test_recursive_alias_is_refused(tmp_path):
    p = tmp_path / "rec.yaml"
    p.write_text("plan: &a {extra: *a}\n")
    assert "recursive alias" in load_bounded(p)


def test_deep_nesting_exits_2_not_recursion_error(tmp_path, capsys):
    p = tmp_path / "deep.yaml"
    p.write_text("plan: " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert "nested deeper" in load_bounded(p)
    code, _, err = run_cli(["plan", "--config", str(p), "-q"], capsys)
    assert code == 2 and "nested deeper" in err and "internal error" not in err


def test_many_values_are_refused_before_composing(tmp_path):
    p = tmp_path / "flow.yaml"
    p.write_text("plan: {extra: [" + "0," * (MAX_BYTES // 2 - 100) + "0]}\n")
    assert f"limit of {MAX_VALUES:,} values" in load_bounded(p, limit_s=None)


def test_nesting_within_libyaml_but_over_the_limit(tmp_path):
    p = tmp_path / "deep.yaml"
    p.write_text("plan: {extra: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "}\n")
    assert f"limit of {MAX_DEPTH} levels" in load_bounded(p)


def test_huge_events_list_is_refused_by_size(tmp_path, capsys):
    p = tmp_path / "events.yaml"
    p.write_text("forecast:\n  events:\n" + "    - '618'\n" * 3_000_000)  # 36 MB
    assert f"limit of {MAX_BYTES // 1024} KiB" in load_bounded(p)
    code, _, err = run_cli(["plan", "--config", str(p), "-q"], capsys)
    assert code == 2 and "KiB" in err and "internal error" not in err


def test_long_events_list_under_the_size_limit_names_the_key(tmp_path):
    p = tmp_path / "events.yaml"
    p.write_text("forecast:\n  events:\n" + "    - '618'\n" * 5_000)
    assert "forecast.events" in load_bounded(p, limit_s=None)


def test_bad_event_name_fails_at_load_naming_the_key(tmp_path, capsys):
    p = tmp_path / "ev.yaml"
    p.write_text("forecast:\n  events: ['618', christmas]\n")
    msg = load_bounded(p)
    assert "forecast.events[1]" in msg and "double11" in msg
    code, _, err = run_cli(["plan", "--config", str(p), "--series", "train/vc6YE", "-q"], capsys)
    assert code == 2 and "forecast.events[1]" in err


@pytest.mark.parametrize("text,key", [
    ("plan:\n  tune_days: .inf\n", "plan.tune_days"),
    ("plan:\n  eval_days: .nan\n", "plan.eval_days"),
    ("plan:\n  tune_days: 'inf'\n", "plan.tune_days"),
    ("plan:\n  tune_days: 100000\n", "plan.tune_days"),
    ("plan:\n  penalty: -.inf\n", "plan.penalty"),
    ("plan:\n  training_bounds: {reservation_ratio: [0, .inf]}\n", "plan.training_bounds.reservation_ratio[1]"),
    ("prices:\n  A100-80GB: {on_demand: .inf, reserved: 3, spot: 2}\n", "prices.A100-80GB.on_demand"),
    ("series:\n  - {id: a, query: up, timezone: Mars/Olympus}\n", "series[0].timezone"),
    ("forecast:\n  lstm_epochs: 100000000\n", "forecast.lstm_epochs"),
    ("forecast:\n  events: ['618', '618']\n", "forecast.events"),
])
def test_values_that_would_fail_later_fail_at_load(tmp_path, capsys, text, key):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    assert key in load_bounded(p)
    code, _, err = run_cli(["plan", "--config", str(p), "-q"], capsys)
    assert code == 2 and key in err and "internal error" not in err


def test_duplicate_key_check_still_works_and_aliases_are_fine(tmp_path):
    from capplan.config.settings import load_config

    p = tmp_path / "dup.yaml"
    p.write_text("plan: {n_calls: 5}\nforecast: {}\nplan: {n_calls: 6}\n")
    msg = load_bounded(p)
    assert "'plan' appears twice" in msg and "line 3" in msg
    ok = tmp_path / "ok.yaml"
    ok.write_text("prices:\n  A: &p {on_demand: 5, reserved: 3, spot: 2}\n  B: *p\n"
                  "forecast: {events: [618, double11]}\n")
    cfg = load_config(ok)
    assert cfg.prices["B"].on_demand == 5 and cfg.forecast.events == ["618", "double11"]


def test_a_value_out_of_range_names_its_line_and_what_the_key_expects(tmp_path):
    from capplan.config.settings import load_config
    from capplan.errors import InputError

    p = tmp_path / "capplan.yaml"
    p.write_text("prices:\n  V100-32GB:\n    on_demand: 3.9\n    reserved: 2.34\n    spot: 1.56\n"
                 "    spot_cap_share: 1.5\n")
    with pytest.raises(InputError) as e:
        load_config(p)
    msg = str(e.value)
    assert "prices.V100-32GB.spot_cap_share" in msg and "(line 6)" in msg and "share (0-1)" in msg
    p.write_text("plan:\n  coverage_target: 2\n")
    with pytest.raises(InputError, match=r"plan.coverage_target: .*\(line 2\); expected: share of intervals"):
        load_config(p)


def test_the_report_records_the_price_book_the_run_used():
    from capplan.config.settings import CapplanConfig
    from capplan.report.model import price_book_used

    cfg = CapplanConfig.model_validate({"prices": {"V100-32GB": {"on_demand": 3.9, "reserved": 2.34, "spot": 1.56,
                                                                 "spot_cap_share": 0.5}}})
    book = price_book_used(cfg)
    assert book["V100-32GB"]["spot_cap_share"] == 0.5 and "default" in book  # the built-in entries beside it
    assert "spot_cap_gpus" not in book["V100-32GB"]  # unset limits are left out
    assert "spot_cap_share" not in price_book_used(CapplanConfig())["V100-32GB"]
