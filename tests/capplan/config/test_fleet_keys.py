"""The fleet keys (gpu_models, min_gpu_memory_gb, share), gpu_catalogue: and fleet: in the config and as CSV
columns: bad input exits 2 naming the series and key before any data is read; no keys, no change."""

from __future__ import annotations

import pandas as pd
import pytest

from capplan.config.settings import CapplanConfig, load_config
from capplan.errors import InputError
from capplan.sources import load_source
from tests.conftest import run_cli


def _yaml(tmp_path, text: str):
    p = tmp_path / "capplan.yaml"
    p.write_text(text)
    return p


def test_series_entry_with_only_fleet_keys_is_accepted_for_another_source(tmp_path):
    cfg = load_config(_yaml(tmp_path, """
series:
  - {id: train/vc6YE, gpu_models: [V100-32GB, A100-40GB], min_gpu_memory_gb: 32}
  - {id: infer/nasa-http, kind: inference, unit: replica, share: 0.25}
fleet: {name: research}
gpu_catalogue:
  L4: {speed: {training: 0.3}}
"""))
    s = {x.id: x for x in cfg.series}
    assert s["train/vc6YE"].gpu_models == ["V100-32GB", "A100-40GB"]
    assert s["infer/nasa-http"].share == 0.25
    assert cfg.fleet.name == "research"
    assert cfg.gpu_catalogue_used()["L4"].speed["training"] == 0.3


def test_pipe_separated_models_and_profile_share():
    cfg = CapplanConfig.model_validate({"series": [{"id": "a", "gpu_models": "A100-80GB|H100-80GB",
                                                    "share": "1g.10gb"}]})
    assert cfg.series[0].gpu_models == ["A100-80GB", "H100-80GB"] and cfg.series[0].share == "1g.10gb"


@pytest.mark.parametrize("entry,key", [
    ("{id: train/x, min_gpu_memory_gb: 200}", "min_gpu_memory_gb"),
    ("{id: train/x, gpu_models: [A100-80GB, B9000]}", "gpu_models"),
    ("{id: train/x, share: 1.5}", "share"),
    ("{id: train/x, share: 0}", "share"),
    ("{id: train/x, gpu_models: [L4, T4], share: 1g.10gb}", "share"),
    ("{id: train/x, gpu_models: [L4], min_gpu_memory_gb: 40}", "min_gpu_memory_gb"),
    ("{id: train/x, gpu_models: [L4], gpu_model: Z80}", "gpu_model"),
])
def test_bad_fleet_keys_exit_2_naming_series_and_key_before_data(tmp_path, capsys, entry, key):
    cfg = _yaml(tmp_path, f"series:\n  - {entry}\n")
    with pytest.raises(InputError) as e:
        load_config(cfg)
    assert key in str(e.value)
    # the CLI: exit 2 before the (absent) data file is looked at
    code, _, err = run_cli(["plan", "--config", str(cfg), "--source", f"csv:{tmp_path / 'absent.csv'}",
                            "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 2 and key in err and "train/x" in err and "file not found" not in err


def test_bad_catalogue_override_names_the_model(tmp_path):
    with pytest.raises(InputError, match="gpu_catalogue.L4"):
        load_config(_yaml(tmp_path, "gpu_catalogue:\n  L4: {memory_gb: -3}\n"))


def test_a_scalar_speed_override_is_refused_naming_the_model(tmp_path):
    with pytest.raises(InputError, match="gpu_catalogue.A100-80GB"):
        load_config(_yaml(tmp_path, "gpu_catalogue:\n  A100-80GB: {speed: 0}\n"))


def test_a_fleet_member_the_source_does_not_hold_is_named_before_any_work(tmp_path, capsys):
    cfg = _yaml(tmp_path, "fleet: {name: r, series: [train/NOPE, train/vc6YE]}\n")
    code, _, err = run_cli(["plan", "--config", str(cfg), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "train/NOPE" in err and "fleet" in err
    cfg = _yaml(tmp_path, "series:\n  - {id: train/NOPE, gpu_models: [A100-80GB]}\n")
    code, _, err = run_cli(["plan", "--config", str(cfg), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "train/NOPE" in err


def test_no_fleet_keys_no_fleet():
    cfg = CapplanConfig()
    assert cfg.fleet is None and cfg.gpu_catalogue == {}
    # a Prometheus series still needs its query
    with pytest.raises(Exception, match="exactly one of"):
        CapplanConfig.model_validate({"series": [{"id": "a"}]})


def _csv(tmp_path, **cols) -> str:
    ts = pd.date_range("2024-01-01", periods=3, freq="5min", tz="UTC")
    df = pd.DataFrame({"timestamp": [t.isoformat() for t in ts], "series_id": "train/a", "value": [1, 2, 3],
                       "kind": "training", **cols})
    p = tmp_path / "d.csv"
    df.to_csv(p, index=False)
    return str(p)


def test_csv_fleet_columns_reach_the_series_meta(tmp_path):
    h = load_source("csv:" + _csv(tmp_path, gpu_models="A100-80GB|H100-80GB", min_gpu_memory_gb="40", share="0.5"))
    m = h.meta["train/a"]
    assert m.gpu_models == ["A100-80GB", "H100-80GB"] and m.min_gpu_memory_gb == 40 and m.share == 0.5
    plain = load_source("csv:" + _csv(tmp_path))
    assert not hasattr(plain.meta["train/a"], "gpu_models")  # no column, no key: the meta is as before


@pytest.mark.parametrize("cols,key", [({"gpu_models": "A100-80GB|Q1"}, "gpu_models"),
                                      ({"share": "2"}, "share"),
                                      ({"min_gpu_memory_gb": "500"}, "min_gpu_memory_gb")])
def test_csv_bad_fleet_column_is_an_input_error(tmp_path, cols, key):
    with pytest.raises(InputError) as e:
        load_source("csv:" + _csv(tmp_path, **cols))
    assert "train/a" in str(e.value) and key in str(e.value)


def test_a_fleet_keys_only_entry_cannot_be_pulled_and_says_so():
    s = CapplanConfig.model_validate({"series": [{"id": "train/a", "share": 0.5}]}).series[0]
    with pytest.raises(InputError, match="train/a.*fleet keys"):
        s.promql()


def test_a_csv_fleet_member_without_gpu_model_fails_at_load_naming_it(tmp_path, capsys):
    t = pd.date_range("2024-01-01", periods=12 * 24 * 3, freq="5min", tz="UTC")
    pd.DataFrame({"timestamp": t.strftime("%Y-%m-%dT%H:%M:%SZ"), "series_id": "a/one", "value": 3.0,
                  "gpu_models": "A100-80GB"}).to_csv(tmp_path / "gm.csv", index=False)
    code, _, err = run_cli(["plan", "--source", f"csv:{tmp_path / 'gm.csv'}", "--out", str(tmp_path / "o"), "-q"],
                           capsys)
    assert code == 2 and "a/one" in err and "without gpu_model" in err and "'default'" not in err
