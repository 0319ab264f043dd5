"""``capplan discover --config``: the config's credentials (bearer token, basic auth), headers and TLS options
reach a Prometheus that refuses requests without them, and the starter config written keeps them (names of
variables and files, never the secrets). A fake Prometheus on 127.0.0.1 that checks every request."""

from __future__ import annotations

import base64

import pytest
import yaml

from tests.capplan.prometheus.test_discover_out import DAY, _answer
from tests.capplan.prometheus.test_prometheus_faults import fake_server, send
from tests.conftest import run_cli

TOKEN, PASSWORD, TENANT = "s3cr3t-token", "pa55word", "tenant-1"


def _guarded(expect: str, seen: list):
    inner = _answer(seen)

    def answer(h, q):
        if h.headers.get("Authorization") != expect or h.headers.get("X-Scope-OrgID") != TENANT:
            send(h, 401, b'{"status":"error","error":"unauthorized"}')
            return
        inner(h, q)
    return answer


@pytest.mark.parametrize("auth", ["bearer", "basic"])
def test_discover_connects_with_the_configs_credentials_and_keeps_them(tmp_path, capsys, monkeypatch, auth):
    monkeypatch.setenv("PROM_TOKEN", TOKEN)
    monkeypatch.setenv("PROM_PASSWORD", PASSWORD)
    (tmp_path / "tenant").write_text(TENANT + "\n")
    expect = (f"Bearer {TOKEN}" if auth == "bearer"
              else "Basic " + base64.b64encode(f"capplan:{PASSWORD}".encode()).decode())
    seen: list = []
    with fake_server(_guarded(expect, seen)) as url:
        prom = {"url": url, "headers": {"X-Scope-OrgID": {"file": str(tmp_path / "tenant")}}, "verify_tls": False,
                **({"bearer_token_env": "PROM_TOKEN"} if auth == "bearer"
                   else {"basic_auth": {"username": "capplan", "password_env": "PROM_PASSWORD"}})}
        cfg = tmp_path / "access.yaml"
        cfg.write_text(yaml.safe_dump({"prometheus": prom}))
        out = tmp_path / "capplan.yaml"
        code, stdout, err = run_cli(["discover", "--config", str(cfg), "--at", DAY.isoformat(), "--out", str(out),
                                     "-q"], capsys)
        assert code == 0, err
        assert seen and "q-o" in stdout
        written = out.read_text()
        assert TOKEN not in written and PASSWORD not in written and TENANT not in written
        p = yaml.safe_load(written)["prometheus"]
        assert p["url"] == url and p["headers"] == {"X-Scope-OrgID": {"file": str(tmp_path / "tenant")}}
        assert p["verify_tls"] is False
        assert (p.get("bearer_token_env") == "PROM_TOKEN" if auth == "bearer"
                else p["basic_auth"] == {"username": "capplan", "password_env": "PROM_PASSWORD"})
        # the written config connects as discover did: a second discover with it alone succeeds
        again = tmp_path / "again.yaml"
        code, _, err = run_cli(["discover", "--config", str(out), "--at", DAY.isoformat(), "--out", str(again),
                                "-q"], capsys)
        assert code == 0, err
        # without the credentials the same server refuses: exit 2, one line naming the URL
        code, _, err = run_cli(["discover", "--prometheus-url", url, "--at", DAY.isoformat(), "--out",
                                str(tmp_path / "none.yaml"), "-q"], capsys)
        assert code == 2 and "refused the credentials" in err and url in err


def test_a_config_without_a_prometheus_section_or_url_is_one_clear_line(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("series: []\n")
    code, _, err = run_cli(["discover", "--config", str(cfg), "--out", str(tmp_path / "o.yaml")], capsys)
    assert code == 2 and "has no prometheus: section" in err and "--prometheus-url" in err
    code, _, err = run_cli(["discover", "--out", str(tmp_path / "o.yaml")], capsys)
    assert code == 2 and "--prometheus-url: required" in err
