"""`deskdex index PATH` while the daemon runs: the daemon is the one writer, so the command hands
it the job and prints the same summary as without a daemon (it used to answer "another deskdex
process is writing")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .conftest import CLI
from .daemon_fixture import BUSY_TIMEOUT, CLIENT_TIMEOUT, DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]


def test_index_hands_its_job_to_the_running_daemon(tmp_path: Path) -> None:
    watched, other = tmp_path / "watched", tmp_path / "other"
    watched.mkdir()
    other.mkdir()
    (watched / "a.txt").write_text("apricot in the watched folder")
    for i in range(5):
        (other / f"o{i}.txt").write_text(f"apricot outside every watched folder {i}")
    os.mkfifo(other / "pipe.txt")
    d = DaemonProcess(tmp_path / "home", [watched]).start()
    try:
        cli = CLI(d.home)
        p = cli.run("index", str(other), "--json", timeout=CLIENT_TIMEOUT)
        summary = json.loads(p.stdout)
        assert summary["indexed"] == 5 and summary["failed_by_reason"] == {"not_regular": 1}, summary
        assert "writing" not in p.stderr, p.stderr
        found = {h["path"] for h in d.call("search", query="apricot", limit=20)["hits"]}
        assert found == {str(watched / "a.txt")} | {str(other / f"o{i}.txt") for i in range(5)}
        # Done again: nothing changed, and the people's form is the one printed without a daemon.
        again = cli.run("index", str(other), timeout=CLIENT_TIMEOUT).stdout
        assert again.startswith("indexed 0, unchanged 6,"), again
        # Asked for by name, it is done even while indexing is paused.
        cli.run("pause")
        (other / "late.txt").write_text("apricot added while paused")
        late = json.loads(cli.run("index", str(other / "late.txt"), "--json", timeout=CLIENT_TIMEOUT).stdout)
        assert late["indexed"] == 1, late
        assert d.proc is not None and d.proc.poll() is None
    finally:
        d.stop()


def test_index_without_a_daemon_still_indexes_itself(cli: CLI, tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("walnut alone")
    summary = json.loads(cli.run("index", str(tmp_path / "x.txt"), "--json").stdout)
    assert summary["indexed"] == 1
