"""Redis memory for a crawl's shared state, per million URLs (issue 19): the seen-set and the per-host
frontier, in the forms a distributed crawl could keep them, measured on a synthetic frontier in a real
redis-server on 127.0.0.1.

    .venv/bin/python benchmarks/redis_frontier.py [--urls 1000000] [--hosts 20000]

URLs are drawn like a crawl's: a Zipf-like spread of hosts, paths of 2 to 5 segments, a query on a
fifth of them (median length 63 bytes). Forms measured (used_memory after, less before):
  seen, URLs      a SET of the normalised URLs themselves
  seen, 8 bytes   a SET of 8-byte BLAKE2b digests (a false "seen" at 10^9 URLs: about 1 in 3.7e10)
  seen, hashed    the digests spread over 65,536 small hashes (Redis packs small hashes as listpacks)
  frontier        one sorted set per host (score = priority), the URLs as members
  queue, as built one hash of URL -> request as JSON (cluster/crawling.py's journal; its seen-set is the first form)
Writes benchmarks/results/redis_frontier.json."""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_convert import start_redis  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("news blog docs api user item product category page archive tag search about help support "
         "download release article story post forum thread wiki data report").split()


def urls(n: int, hosts: int, rnd: random.Random) -> list[tuple[str, str]]:
    names = [f"www.site{i}.example.{rnd.choice(['com', 'org', 'net', 'de', 'fr'])}" for i in range(hosts)]
    weights = [1 / (i + 1) for i in range(hosts)]
    out = []
    for host in rnd.choices(names, weights, k=n):
        path = "/".join(rnd.choice(WORDS) + (str(rnd.randint(1, 99999)) if rnd.random() < 0.5 else "")
                        for _ in range(rnd.randint(2, 5)))
        query = f"?id={rnd.randint(1, 10**7)}&p={rnd.randint(1, 50)}" if rnd.random() < 0.2 else ""
        out.append((host, f"https://{host}/{path}{query}"))
    return out


def used(r) -> int:  # type: ignore[no-untyped-def]
    return int(r.info("memory")["used_memory"])


def main() -> None:
    import redis

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--hosts", type=int, default=20_000)
    args = ap.parse_args()
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="deskdex-redis-"))
    proc, url = start_redis(folder)
    try:
        r = redis.Redis.from_url(url)
        sample = urls(args.urls, args.hosts, random.Random(19))
        lengths = sorted(len(u) for _, u in sample)
        result = {"when": time.strftime("%Y-%m-%d %H:%M"), "urls": args.urls, "hosts": args.hosts,
                  "median_url_bytes": lengths[len(lengths) // 2],
                  "redis": r.info("server")["redis_version"], "bytes_per_url": {}}

        def measure(name: str, fill) -> None:  # type: ignore[no-untyped-def]
            r.flushall()
            before = used(r)
            start = time.perf_counter()
            for i in range(0, len(sample), 10_000):
                pipe = r.pipeline(transaction=False)
                fill(pipe, sample[i:i + 10_000])
                pipe.execute()
            seconds = time.perf_counter() - start
            per = (used(r) - before) / len(sample)
            result["bytes_per_url"][name] = round(per, 1)
            print(f"{name:16s} {per:7.1f} bytes a URL, {per * 1e6 / 2**20:7.1f} MiB a million, "
                  f"{len(sample) / seconds:9.0f} URLs/s written", flush=True)

        def digest(u: str) -> bytes:
            return hashlib.blake2b(u.encode(), digest_size=8).digest()

        measure("seen, URLs", lambda p, rows: p.sadd("seen", *(u for _, u in rows)))
        measure("seen, 8 bytes", lambda p, rows: p.sadd("seen", *(digest(u) for _, u in rows)))

        def hashed(p, rows) -> None:  # type: ignore[no-untyped-def]
            for _, u in rows:
                d = digest(u)
                p.hset(b"seen:" + d[:2], d[2:], b"")

        r.config_set("hash-max-listpack-entries", "512")
        measure("seen, hashed", hashed)

        def frontier(p, rows) -> None:  # type: ignore[no-untyped-def]
            for host, u in rows:
                p.zadd(f"q:{host}", {u: 0.5})

        measure("frontier", frontier)

        # As built (deskdex.cluster.crawling.RedisJournal): every queued request in one hash, URL ->
        # its request as JSON (depth, priority, kind, retries).
        def journal(p, rows) -> None:  # type: ignore[no-untyped-def]
            p.hset("queue", mapping={u: json.dumps({"url": u, "depth": 2, "priority": 0.5, "kind": "page",
                                                    "retries": 0, "off_topic_run": 0}) for _, u in rows})

        measure("queue, as built", journal)
    finally:
        proc.terminate()
        proc.wait(10)
    path = ROOT / "benchmarks" / "results" / "redis_frontier.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
