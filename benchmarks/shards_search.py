"""One index against the same documents over 3 shards searched as one (issue 19): the share of queries
whose merged top 10 is the one index's, and the latency of each, in one process, warm.

    .venv/bin/python benchmarks/shards_search.py [--files 6000]

The documents are `daemon_scale.py`'s generated notes (a small vocabulary, so many near-ties: a hard case
for agreement); one home indexes them all, three homes one shard each (`deskdex index --shard I/3`).
Queries: 30 of 1 to 3 words of the notes' vocabulary. Each shard is asked for 2 x (offset + limit) + 10 hits.
Then the third shard is served by `deskdex serve` on 127.0.0.1 and asked over HTTP, then HTTPS
(index/remote.py): its answers must be the folder's, and the latency is measured again, with one RemoteShard
kept for every search (its connections kept: a daemon) and with a new one for each search (a `deskdex search`
process). Writes benchmarks/results/shards_search.json."""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
DESKDEX = str(Path(sys.executable).parent / "deskdex")


def main() -> None:
    import daemon_scale

    from deskdex.index import Collection, search
    from deskdex.index.shards import search_shards

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=6000)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="deskdex-shards-"))
    try:
        tree = work / "tree"
        words = daemon_scale.words()
        daemon_scale.generate(tree, args.files, words)
        homes = {"one": []} | {f"shard{i}": ["--shard", f"{i}/3"] for i in range(3)}
        for home, extra in homes.items():
            subprocess.run([DESKDEX, "--home", str(work / home), "index", str(tree), "--no-progress", *extra],
                           check=True, capture_output=True)
        rnd = random.Random(5)
        queries = [" ".join(rnd.sample(words, k)) for k in (1, 1, 2, 2, 3) for _ in range(6)]
        one = Collection.open(str(work / "one" / "data"))
        shards = [Collection.open(str(work / f"shard{i}" / "data")) for i in range(3)]

        def timed(f) -> list[float]:  # type: ignore[no-untyped-def]
            out = []
            for q in queries:
                start = time.perf_counter()
                f(q)
                out.append((time.perf_counter() - start) * 1000)
            return out

        for _ in range(2):  # the second round is the one kept: both warm
            whole = timed(lambda q: search(one, q, limit=10))
            merged = timed(lambda q: search_shards(shards, q, limit=10))
        served_http = _served(work, shards, queries, timed, tls=False)
        served_https = _served(work, shards, queries, timed, tls=True)
        same = ties = 0
        for q in queries:
            whole_hits = search(one, q, limit=40, snippets=False)["hits"]
            got = {h["uri"] for h in search_shards(shards, q, limit=10, snippets=False)["hits"]}
            want = {h["uri"] for h in whole_hits[:10]}
            same += got == want
            # The documents that differ score exactly the tenth's in the one index: a tie cut at
            # ten, which each index breaks by the order documents were added.
            if got != want and len(whole_hits) > 10:
                tenth = round(whole_hits[9]["score"], 4)
                scores = {h["uri"]: round(h["score"], 4) for h in whole_hits}
                ties += all(scores.get(u) == tenth for u in got ^ want)
        result = {"when": time.strftime("%Y-%m-%d %H:%M"), "files": args.files, "queries": len(queries),
                  "same_top10": same, "differing_only_by_a_tie_at_ten": ties,
                  "one_index_ms": {"median": round(statistics.median(whole), 1),
                                   "p90": round(sorted(whole)[int(0.9 * len(whole))], 1)},
                  "three_shards_ms": {"median": round(statistics.median(merged), 1),
                                      "p90": round(sorted(merged)[int(0.9 * len(merged))], 1)},
                  "one_of_three_served_http": served_http, "one_of_three_served_https": served_https}
        one.close()
        for s in shards:
            s.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=1))
    path = ROOT / "benchmarks" / "results" / "shards_search.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print("wrote", path)


def _figures(times: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(times), 1), "p90": round(sorted(times)[int(0.9 * len(times))], 1)}


def _served(work: Path, shards: list, queries: list[str], timed, tls: bool) -> dict[str, object]:
    """The third shard served by `deskdex serve` (over HTTPS with a self-signed certificate made by
    openssl): its answers against the folder's, and the latency of a merged search asking it with one
    RemoteShard kept for every search (a daemon's way) and with a new one for each search (a
    `deskdex search` process's way)."""
    import socket

    from deskdex.index.remote import RemoteShard
    from deskdex.index.shards import search_shards

    token = "benchmark-token-0123456789"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = work / "shard2" / "config"
    config.mkdir(parents=True, exist_ok=True)
    settings, ca = f'token = "{token}"\n', ""
    if tls:
        cert, key = work / "shard.crt", work / "shard.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-subj", "/CN=deskdex benchmark", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-days", "1", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
        settings += f'tls_cert = "{cert}"\ntls_key = "{key}"\n'
        ca = str(cert)
    (config / "config.toml").write_text(settings)
    server = subprocess.Popen([DESKDEX, "--home", str(work / "shard2"), "serve", "--listen", f"127.0.0.1:{port}"],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None and "serving" in server.stdout.readline()
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    try:
        kept = RemoteShard(url, token, ca)
        served = [*shards[:2], kept]
        for _ in range(2):
            kept_ms = timed(lambda q: search_shards(served, q, limit=10))
            new_ms = timed(lambda q: search_shards([*shards[:2], RemoteShard(url, token, ca)], q, limit=10))
        same = sum([(h["uri"], round(h["score"], 4), h["snippet"]) for h in search_shards(served, q)["hits"]]
                   == [(h["uri"], round(h["score"], 4), h["snippet"]) for h in search_shards(shards, q)["hits"]]
                   for q in queries)
        kept.close()
    finally:
        server.terminate()
        server.wait(10)
    return {"same_as_folder": same, "kept_ms": _figures(kept_ms), "new_each_search_ms": _figures(new_ms)}


if __name__ == "__main__":
    main()
