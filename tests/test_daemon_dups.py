"""`deskdex dups FILE` through a running daemon converts the file outside every lock: while a slow file
converts, searches are answered and the watcher's changes are indexed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from .daemon_fixture import DaemonProcess

pytestmark = pytest.mark.slow  # a daemon

PARAGRAPH = "<p>The quick brown fox jumps over the lazy dog near the riverbank, where kestrels hunt at dusk.</p>\n"


def test_searches_and_indexing_go_on_while_dups_converts_a_slow_file(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "kestrels.txt").write_text("kestrels hover over the meadow at dusk\n")
    # Several MB of HTML: seconds of main-content extraction in the converter (measured: about 0.5 s
    # per MB here since issue 18), slow enough to search many times while it runs.
    slow = tmp_path / "slow.html"
    slow.write_text("<html><head><title>slow</title></head><body>" + PARAGRAPH * 120_000 + "</body></html>")
    d = DaemonProcess(tmp_path / "home", [docs]).start()
    try:
        done: dict[str, object] = {}

        def dups() -> None:
            started = time.monotonic()
            try:  # a loaded machine converts the slow file in more than the fixture's 60 s
                done["result"] = d.call("dups", timeout=300, path=str(slow))
            except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                done["result"] = {"error": repr(exc)}
            done["seconds"] = time.monotonic() - started

        t = threading.Thread(target=dups)
        t.start()
        time.sleep(0.3)  # the daemon has the request and is converting
        (docs / "falcons.txt").write_text("a peregrine falcon stoops\n")
        slowest, answered, indexed_during = 0.0, 0, False
        while t.is_alive():
            started = time.monotonic()
            hits = d.search("kestrels")
            slowest = max(slowest, time.monotonic() - started)
            answered += 1
            assert hits == [str(docs / "kestrels.txt")]
            if not indexed_during and d.search("peregrine") == [str(docs / "falcons.txt")]:
                indexed_during = t.is_alive()
            time.sleep(0.05)
        t.join()
        assert "error" not in done["result"], done["result"]  # it did convert
        assert done["seconds"] > 2.0, f"dups took only {done['seconds']:.1f} s: too fast to show anything"
        assert answered >= 10 and slowest < 1.5, (answered, slowest, done["seconds"])
        assert indexed_during, "a file saved while dups converted was not indexed until it finished"
    finally:
        d.stop()
