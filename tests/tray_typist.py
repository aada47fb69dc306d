"""The child process of tests/test_tray_endurance.py: the tray's search window on the X display of
$DISPLAY, talking to the daemon at argv[1], and a user typing argv[2] searches into it, one after
another, each with real key events (QTest.keyClicks), each waited for until its results are listed
and painted.

First it prints what the tray's check of the binding found (binding.py). After each search it prints
one JSON line: the search's number and query, the results listed, its
memory (RSS and PSS, kB, from /proc/self/smaps_rollup) and the reference counts of None and True
(what a binding that loses references eats up, until the interpreter aborts). Then "done", and it
stays up, idle, until its stdin closes, so that the test sees it alive. It runs in a process of its
own because a crash of Qt or of the binding aborts the process: the test reports it with the words
on stderr instead of ending the test run."""

from __future__ import annotations

import gc
import json
import select
import sys
import time
from pathlib import Path
from typing import Any, Callable

WAIT = 60.0  # seconds one search may take to be answered on a busy machine


def queries(n: int, documents: int) -> list[str]:
    """``n`` searches that alternate between many results (more than one page: all of them painted
    at once by scrolling) and few, words finished and still being typed (a prefix)."""
    kinds = ["zephyr", "wind", "zep", "win", "zephyr wind"]
    return [kinds[i % 5] if i % 6 else f"wind {i % documents}" for i in range(n)]


def memory() -> dict[str, int]:
    """RSS and PSS of this process in kB (PSS counts a shared page by its share: Qt's libraries)."""
    out = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Rss", "Pss"):
            out[key.lower()] = int(value.split()[0])
    return out


def main(socket: str, count: int, documents: int) -> int:
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    from deskdex.clients.tray.app import TrayApp
    from deskdex.clients.tray.binding import binding_problem

    # What `deskdex tray` would say of this binding before it refused to start; the searches run
    # anyway, as they would on a binding whose fault the check misses.
    print(json.dumps({"binding": binding_problem()}), flush=True)
    app = QApplication(["deskdex-tray-typist"])
    tray = TrayApp(socket, poll_ms=3_600_000)  # one status call; the searches are what is measured
    answers = [0]  # search answers received (counted, not kept: this process's memory is measured)

    def answered(_ticket: int, result: Any, _error: Any) -> None:
        # connected after the window's own slot: by now the window has listed these hits
        if isinstance(result, dict) and "hits" in result:
            answers[0] += 1

    def wait(cond: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT
        while not cond():
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}")
            QTest.qWait(10)

    tray.caller.finished.connect(answered)
    tray.start()
    tray.search_action.trigger()
    w = tray.search_window
    if not QTest.qWaitForWindowExposed(w, int(WAIT * 1000)):
        raise SystemExit("the search window was never shown")
    for n, query in enumerate(queries(count, documents), 1):
        before = answers[0]
        w.box.clear()
        QTest.keyClicks(w.box, query)
        wait(lambda before=before: answers[0] > before and not w.timer.isActive()
             and tray.caller.pool.activeThreadCount() == 0, f"the answer to search {n} ({query!r})")
        shown = w.results.topLevelItemCount()
        w.results.scrollToBottom()  # the rows below the fold are painted too
        QTest.qWait(20)
        print(json.dumps({"n": n, "query": query, "shown": shown, **memory(),
                          "none": sys.getrefcount(None), "true": sys.getrefcount(True),
                          "objects": len(gc.get_objects())}), flush=True)
    print("done", flush=True)
    # Alive, its event loop running, until the test has looked at this process and closes stdin.
    while not select.select([sys.stdin], [], [], 0)[0]:
        QTest.qWait(50)
    tray.close()
    app.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
