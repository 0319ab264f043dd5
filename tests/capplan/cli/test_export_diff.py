"""``capplan export --diff`` on a hostile output folder: a huge file is never read whole, a binary file or
terminal escapes are never printed raw, and a symlink out of the folder is never followed."""

from __future__ import annotations

import tracemalloc

from optimizer.exporters import write_all
from tests.conftest import run_cli
from tests.optimizer.exporters.test_exporters import PLANS


def _manifest(out):
    return next((out / "manifests").glob("*-scaledobject.yaml"))


def test_huge_binary_and_escaped_files_are_shown_as_placeholders(tmp_path, capsys):
    out = tmp_path / "out"
    write_all(PLANS, out)
    big = out / "manifests" / "big.yaml"
    with big.open("wb") as f:
        f.truncate(64 << 20)  # 64 MiB, sparse
    (out / "manifests" / "blob.yaml").write_bytes(b"\x00\x01\x02\x1b[2J\xff\xfe" * 100)
    f = _manifest(out)
    f.write_text(f.read_text() + "# \x1b]0;owned\x07\x1b[31mred\n")
    tracemalloc.start()
    code, text, err = run_cli(["export", "--out", str(out), "--diff"], capsys)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert code == 1, err
    assert "\x1b" not in text and "\x00" not in text and "\x07" not in text
    assert "\\x1b[31mred" in text and "(binary file, 900 bytes)" in text
    assert f"({64 << 20} bytes: larger than" in text
    assert peak < 32 << 20, peak  # the 64 MiB file was never read


def test_a_symlink_out_of_the_folder_is_not_followed(tmp_path, capsys):
    out = tmp_path / "out"
    write_all(PLANS, out)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "token.yaml").write_text("token: s3cr3t-value\n")
    (out / "manifests" / "elsewhere").symlink_to(secret)
    (out / "manifests" / "one.yaml").symlink_to(secret / "token.yaml")
    code, text, err = run_cli(["export", "--out", str(out), "--diff"], capsys)
    assert code == 1 and "s3cr3t-value" not in text + err
    assert "not followed" in text
