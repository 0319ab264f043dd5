"""``capplan discover`` never replaces a file it did not write: its default ``--out capplan.yaml`` may be a
hand-written config. A fake Prometheus on 127.0.0.1."""

from __future__ import annotations

import json

import pandas as pd

from capplan.prometheus.discover import MARKER
from tests.capplan.prometheus.test_prometheus_faults import epoch, fake_server, send
from tests.conftest import run_cli

DAY = pd.Timestamp("2024-03-04T00:00:00Z")
HAND = "# my own config\nstore: /data/store\nseries: []\n"


def _answer(seen):
    def answer(h, q):
        seen.append(q)
        res = ([{"metric": {"queue_name": "q-o", "resource": "nvidia.com/gpu"}, "values": [[epoch(DAY), "2"]]}]
               if "volcano_queue_request_scalar_resources" in q else [])
        send(h, 200, json.dumps({"status": "success", "data": {"resultType": "matrix", "result": res}}).encode())
    return answer


def test_hand_written_config_is_refused_before_any_query(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "capplan.yaml").write_text(HAND)
    seen = []
    with fake_server(_answer(seen)) as url:
        code, out, err = run_cli(["discover", "--prometheus-url", url, "--at", DAY.isoformat()], capsys)
    assert code == 2 and seen == []
    assert "capplan.yaml" in err and "--out other.yaml" in err and "--force" in err
    assert (tmp_path / "capplan.yaml").read_text() == HAND


def test_discover_replaces_its_own_file_and_force_replaces_any(tmp_path, capsys):
    out_file = tmp_path / "c.yaml"
    seen = []
    with fake_server(_answer(seen)) as url:
        args = ["discover", "--prometheus-url", url, "--at", DAY.isoformat(), "--out", str(out_file)]
        assert run_cli(args, capsys)[0] == 0
        assert out_file.read_text().startswith(MARKER)
        assert run_cli(args, capsys)[0] == 0  # its own file: replaced
        edited = out_file.read_text() + "# my edit: keep this\n"  # its own file, edited by hand since: kept
        out_file.write_text(edited)
        code, _, err = run_cli(args, capsys)
        assert code == 2 and "was edited since capplan discover wrote it" in err and out_file.read_text() == edited
        out_file.write_text(HAND)
        code, _, err = run_cli(args, capsys)
        assert code == 2 and out_file.read_text() == HAND
        code, _, err = run_cli(args + ["--force"], capsys)
        assert code == 0, err
    assert out_file.read_text().startswith(MARKER) and "q-o" in out_file.read_text()


def test_a_symlinked_out_is_refused(tmp_path, capsys):
    target = tmp_path / "real.yaml"
    target.write_text(MARKER + "\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    with fake_server(_answer([])) as url:
        code, _, err = run_cli(["discover", "--prometheus-url", url, "--out", str(link)], capsys)
    assert code == 2 and "symlink" in err and link.is_symlink() and target.read_text() == MARKER + "\n"
