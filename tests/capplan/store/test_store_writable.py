"""A store that cannot be written is said before any work (not after the forecasts): exit 2 naming the
store and the cause."""

from __future__ import annotations

import errno
import tempfile
import time

import pytest

from capplan.errors import InputError
from capplan.store.local import Store
from tests.conftest import run_cli


def test_read_only_store_is_refused_naming_the_cause(tmp_path, monkeypatch):
    def read_only(*a, **kw):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    with pytest.raises(InputError, match="store .*: cannot write there \\(Read-only file system\\)"):
        Store(tmp_path / "store").check_writable()


def test_writable_store_leaves_nothing_behind(tmp_path):
    st = Store(tmp_path / "new" / "store")
    st.check_writable()
    assert st.root.is_dir() and list(st.root.iterdir()) == []


def test_plan_refuses_an_unwritable_store_before_forecasting(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    t0 = time.monotonic()
    code, out, err = run_cli(["plan", "--source", "sample", "--store", str(blocker / "store"), "--out",
                              str(tmp_path / "o")], capsys)
    assert code == 2 and "cannot write there" in err and "forecast" not in err
    assert time.monotonic() - t0 < 20
