"""The accuracy benchmark keeps the sample's RESULTS.md section apart from runs on other sources."""

from benchmarks.accuracy import record_as


def test_a_run_on_another_source_is_recorded_in_its_own_section():
    assert record_as([]) == "accuracy"
    assert record_as(["--series", "train/vc6YE", "--no-bound"]) == "accuracy"
    assert record_as(["--source", "sample"]) == "accuracy"
    assert record_as(["--source", "parquet:/tmp/earth.parquet", "--timezone", "UTC"]) == "accuracy-source"
    assert record_as(["--source=csv:/tmp/unseen.csv"]) == "accuracy-source"
