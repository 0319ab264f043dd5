"""The benchmark runner (benchmarks/runner.py), its shared options (benchmarks/common.py) and the
RESULTS.md writer (benchmarks/results.py)."""

from __future__ import annotations

import pytest

from benchmarks import common, results, runner
from benchmarks.results import Run


def _run(name: str, output: str) -> Run:
    return Run(name, f"python -m benchmarks {name}", output, 12.3, (1.0, 2.0, 3.0), (1.5, 2.0, 3.0))


def test_record_replaces_its_own_section_and_keeps_the_rest(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text(results.HEADER + results.EARLIER + "\n\nfound earlier\n")
    results.record(_run("replay", "first figures"), path)
    results.record(_run("tiers", "tier figures"), path)
    results.record(_run("replay", "second figures"), path)
    text = path.read_text()
    assert text.startswith(results.HEADER) and text.endswith("found earlier\n")
    assert "first figures" not in text and text.count("second figures") == 1 and "tier figures" in text
    # new sections go before the earlier findings, in the order first recorded
    assert text.index("## replay") < text.index("## tiers") < text.index(results.EARLIER)
    section = text[text.index("<!-- benchmark:replay -->"):text.index("<!-- /benchmark:replay -->")]
    assert "- command: `python -m benchmarks replay`" in section
    assert "wall clock: 12 s" in section and "1.00 2.00 3.00 before, 1.50 2.00 3.00 after" in section
    assert "commit: " in section and " UTC" in section


def test_record_starts_a_missing_file(tmp_path):
    path = results.record(_run("plan", "plan figures"), tmp_path / "RESULTS.md")
    assert path.read_text().startswith("# Benchmark results") and "plan figures" in path.read_text()


def test_runner_refuses_an_unknown_benchmark(capsys):
    with pytest.raises(SystemExit) as exc:
        runner.main(["no-such-bench"])
    assert exc.value.code == 2 and "unknown benchmark 'no-such-bench'" in capsys.readouterr().err


def test_runner_lists_every_benchmark_and_each_is_a_module_with_main(capsys):
    runner.main(["list"])
    out = capsys.readouterr().out
    for name, (module, _) in runner.BENCHMARKS.items():
        assert name in out
        assert callable(__import__(f"benchmarks.{module}", fromlist=["main"]).main)


def test_runner_records_a_real_run(tmp_path, capsys):
    path = tmp_path / "RESULTS.md"
    runner.main(["--results", str(path), "replay"])
    printed = capsys.readouterr().out
    assert "steps/s" in printed  # shown as it runs
    text = path.read_text()
    assert "- command: `python -m benchmarks replay`" in text and "steps/s" in text
    runner.main(["--no-record", "--results", str(tmp_path / "other.md"), "replay"])
    assert not (tmp_path / "other.md").exists()


def test_shared_series_option_takes_lists_and_repeats():
    ap = common.parser("Doc line.\n\nMore.", "x")
    common.add_series(ap)
    common.add_seeds(ap, [0, 1])
    assert ap.parse_args([]).series is None and ap.parse_args([]).seeds == [0, 1]
    assert ap.parse_args(["--series", "a", "b", "--series", "c"]).series == ["a", "b", "c"]
    assert ap.description == "Doc line."


def test_forecasts_from_names_a_folder_without_a_backtest(tmp_path):
    with pytest.raises(SystemExit, match="no backtest.parquet"):
        common.forecasts_from(tmp_path)
