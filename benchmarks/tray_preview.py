"""How long the tray's preview pane (clients/tray/preview.py) takes to show a long document, and how
long the window's event loop waits meanwhile (what a user feels as a frozen window): a made-up
paged document of 100, 1,000 and 5,000 blocks (the most the pane shows) of 60 words, one in about
eleven a hit, handed to the pane as the daemon's document op answers.

    python benchmarks/tray_preview.py

Runs on the X display in $DISPLAY, else on Qt's offscreen platform. Results on stdout: the time to
the first blocks shown, to the whole text, and the longest wait of a 1 ms timer meanwhile."""

from __future__ import annotations

import os
import random
import time
from typing import Any


def document(n: int, rng: random.Random) -> dict[str, Any]:
    words = ["river", "kingfisher", "marsh", "heron", "the", "a", "of", "water", "bank", "reeds", "dusk"]
    blocks = []
    for i in range(n):
        ws = [rng.choice(words) for _ in range(60)]
        marks, at = [], 0
        for w in ws:
            if w == "kingfisher":
                marks.append([at, at + len(w)])
            at += len(w) + 1
        blocks.append({"kind": "p", "level": 0, "text": " ".join(ws), "page": i // 10 + 1, "boilerplate": False,
                       "marks": marks})
    return {"uri": "file:///made-up.pdf", "path": "/made-up.pdf", "title": "made up", "mime": "application/pdf",
            "size": 1, "mtime": 0, "lang": "en", "pages": n // 10 + 1, "source": "files", "cluster": 0,
            "duplicates": 0, "similar": 0, "blocks": blocks, "marks": sum(len(b["marks"]) for b in blocks),
            "truncated": False}


def main() -> None:
    if not os.environ.get("DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from deskdex.clients.tray.caller import Caller
    from deskdex.clients.tray.preview import MAX_BLOCKS, Preview

    app = QApplication(["tray-preview-benchmark"])
    pane = Preview(Caller("/nonexistent"), lambda *a: None)  # no daemon asked: the answer is handed to it
    pane.resize(500, 600)
    pane.show()
    gaps: list[float] = []
    last = [time.perf_counter()]

    def tick() -> None:
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now

    timer = QTimer(interval=1)
    timer.timeout.connect(tick)
    timer.start()
    rng = random.Random(1)
    print(f"Qt platform {app.platformName()}")
    for n in (100, 1000, MAX_BLOCKS, MAX_BLOCKS):  # the last twice: the first pays for warming up
        doc = document(n, rng)
        started = time.perf_counter()
        pane.show_answer(doc, {"uri": doc["uri"], "page": None})
        first = time.perf_counter() - started
        gaps.clear()
        last[0] = time.perf_counter()
        while pane.loading():
            app.processEvents()
        done = time.perf_counter() - started
        print(f"{n:5,} blocks, {len(pane.hits):6,} hits: first blocks shown in {first * 1000:4.0f} ms, all in "
              f"{done * 1000:5.0f} ms; the event loop waited {max(gaps, default=0) * 1000:3.0f} ms at most")


if __name__ == "__main__":
    main()
