"""Live changes in bursts: after each burst, once the daemon says idle, does the index equal the disk?

    .venv/bin/python benchmarks/live_burst.py [--bursts 10] [--ops 2000] [--seed 14] [--files 300]

Starts `deskdex daemon` on a seeded tree of text files, then runs ``--bursts`` bursts of ``--ops``
seeded operations each (tests/live_burst.py: create, modify, rename, delete, editors' saves
followed at once by a delete or a rename, rename chains, swaps, folder renames, folders and files
moved into and out of the watched tree, folders deleted), with short random pauses that split a
burst into batches. After each burst it writes a marker file, waits until the daemon has indexed it
and says idle with nothing queued, and compares the catalog and the search results with the disk:

- ghosts: documents for files that no longer exist;
- lost: files that exist and have no document;
- stale: documents whose content checksum differs from the file's (or recorded as failed);
- unsearchable: catalog and full-text index disagree.

Prints one line per burst and the totals, and writes benchmarks/results/live_burst.json. The
daemon's state carries over from burst to burst, as it would for a user.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deskdex.pipeline.scan import Excluder  # noqa: E402
from tests.daemon_fixture import DaemonProcess  # noqa: E402
from tests.live_burst import Burst, explain, settle_and_compare  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bursts", type=int, default=10)
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--files", type=int, default=300, help="files in the tree before the first burst")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "live_burst.json"))
    ap.add_argument("--keep", metavar="DIR", help="work in DIR (made, must not exist) and keep it: the tree, "
                    "the daemon's home and its log, for a look afterwards")
    ap.add_argument("--debug", action="store_true", help="the daemon logs every batch it applies (with --keep)")
    args = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory(prefix="deskdex-burst-") as tmp:
        base = Path(args.keep or tmp)
        base.mkdir(parents=True, exist_ok=not args.keep)
        burst = Burst(base / "docs", base / "outside", args.seed)
        burst.seed_tree(args.files, folders=max(1, args.files // 30))
        daemon = DaemonProcess(base / "home", [burst.root], args=("-v",) if args.debug else ()).start()
        excluded = Excluder().excluded
        try:
            for n in range(args.bursts):
                # A new seed per burst, from the first: every burst differs, and each can be rerun.
                burst.rnd.seed(args.seed * 1000 + n)
                started = time.monotonic()
                burst.run(args.ops)
                ran = time.monotonic() - started
                diff = settle_and_compare(daemon, burst.root, burst.root / f"marker-{n}.txt", _marker_word(n),
                                          excluded)
                settled = time.monotonic() - started - ran
                row = {"burst": n, "seed": args.seed * 1000 + n, "ops": args.ops, **diff.counts(),
                       "files": len(burst.files), "burst_seconds": round(ran, 1),
                       "settle_seconds": round(settled, 1), "examples": str(diff)}
                rows.append(row)
                print(f"burst {n}: ghosts {row['ghosts']}, lost {row['lost']}, stale {row['stale']}, "
                      f"unsearchable {row['unsearchable']} ({row['files']} files; burst {ran:.1f} s, "
                      f"settled {settled:.1f} s later)", flush=True)
                if not diff.ok:
                    row["explained"] = explain(diff, daemon.home / "data")
                    print("  " + "\n  ".join(row["explained"]), flush=True)
        finally:
            status = daemon.call("status") if daemon.proc and daemon.proc.poll() is None else {}
            daemon.stop()
    totals = {k: sum(r[k] for r in rows) for k in ("ghosts", "lost", "stale", "unsearchable")}
    print(f"total over {len(rows)} bursts of {args.ops} operations: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
    print("operations:", dict(sorted(burst.counts.items())))
    Path(args.out).write_text(json.dumps({"bursts": rows, "totals": totals, "operations": dict(burst.counts),
                                          "converted": status.get("converted"),
                                          "failed_by_reason": status.get("failed_by_reason")}, indent=1) + "\n")
    return 0 if not any(totals.values()) else 1


def _marker_word(n: int) -> str:
    # One word no stemmer shortens and no generated file contains.
    return "qmark" + "".join("bcdfghjklm"[int(c)] for c in str(n)) + "x"


if __name__ == "__main__":
    sys.exit(main())
