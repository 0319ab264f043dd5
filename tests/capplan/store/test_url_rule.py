"""The one rule for store URLs (capplan.store.remote.check_store_url): credentials, a query string or
``memory://`` in ``store:``, ``models:``, ``--store`` (plan, serve, discover) are refused with exit 2,
and the secret is in no output."""

from __future__ import annotations

import pytest

from capplan.config.settings import ForecastConfig, load_config
from capplan.errors import InputError
from capplan.store.local import Store
from capplan.store.remote import check_store_url, open_root, redact_url
from tests.conftest import run_cli

SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzEXAMPLEKEY"
BAD = [f"s3://AKIAIOSFODNN7EXAMPLE:{SECRET}@bucket/store", f"memory://user:{SECRET}@x/store",
       f"gs://bucket/store?token={SECRET}", f"s3://bucket/store#{SECRET}", f"file://me:{SECRET}@/tmp/x"]


@pytest.mark.parametrize("url", BAD)
def test_secret_in_a_store_url_is_refused_without_showing_it(url):
    for check in (lambda: check_store_url(url, "store"), lambda: Store(url), lambda: open_root(url),
                  lambda: ForecastConfig().registry(url)):
        with pytest.raises(InputError) as ei:
            check()
        assert SECRET not in str(ei.value) and "AKIA" not in str(ei.value)
        assert "store" in str(ei.value) or "URL" in str(ei.value)


def test_redact_url_hides_userinfo_even_with_slashes_and_at_signs():
    assert redact_url(f"s3://K:{SECRET}@bucket/p") == "s3://***@bucket/p"
    assert redact_url("s3://K:a@b/c@bucket/p") == "s3://***@bucket/p"
    assert redact_url(f"gs://b/p?t={SECRET}") == "gs://b/p?***"
    assert redact_url("/plain/path") == "/plain/path"


def test_memory_store_is_refused_as_it_does_not_outlive_the_process():
    with pytest.raises(InputError, match="memory://.*exits"):
        Store("memory://capplan/store")
    with pytest.raises(InputError, match="memory://"):
        ForecastConfig().registry("memory://capplan/models")


@pytest.mark.parametrize("key", ["store", "models"])
def test_config_key_with_credentials_is_refused_naming_the_key(tmp_path, key):
    p = tmp_path / "capplan.yaml"
    p.write_text(f"{key}: s3://AKIAIOSFODNN7EXAMPLE:{SECRET}@bucket/{key}\n")
    with pytest.raises(InputError) as ei:
        load_config(p)
    msg = str(ei.value)
    assert f"{key}:" in msg and "credentials" in msg and SECRET not in msg and "s3://***@bucket" in msg


@pytest.mark.parametrize("argv", [
    ["plan", "--source", "sample", "--store", f"s3://AKIAIOSFODNN7EXAMPLE:{SECRET}@bucket/store"],
    ["serve", "--port", "0", "--store", f"s3://AKIAIOSFODNN7EXAMPLE:{SECRET}@bucket/store"],
    ["serve", "--port", "0", "--store", "memory://capplan/store"],
    ["discover", "--prometheus-url", "http://127.0.0.1:9", "--store", f"s3://K:{SECRET}@bucket/store"],
    ["discover", "--prometheus-url", f"http://u:{SECRET}@127.0.0.1:9"],
])
def test_cli_refuses_a_secret_url_with_exit_2_and_never_prints_it(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(argv + (["--out", str(tmp_path / "o")] if argv[0] in ("plan",) else []), capsys)
    assert code == 2, err
    assert SECRET not in out + err and "AKIA" not in out + err
    assert "refused" in err or "must not contain credentials" in err
    assert "errors.pydantic.dev" not in err


def test_dask_scheduler_address_with_credentials_is_refused_without_showing_them(tmp_path):
    p = tmp_path / "capplan.yaml"
    p.write_text(f"plan:\n  executor: dask\n  scheduler: tls://admin:{SECRET}@dask:8786\n")
    with pytest.raises(InputError) as ei:
        load_config(p)
    assert "scheduler tls://***@dask:8786" in str(ei.value) and SECRET not in str(ei.value)
