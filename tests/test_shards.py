"""Sharded indexes searched as one: a collection split over 3 homes by `deskdex index --shard I/N`
(each shard written by its own process), searched from a fourth home whose setting ``shards`` names
them, answers like one index holding every document (issue 19)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from .conftest import CLI
from .test_dups_cli import WORDS

pytestmark = pytest.mark.slow  # several indexes, shard servers and daemons

def _docstrings(module: Path) -> str:
    """A module's docstrings: real English prose with real word statistics (Zipf's, not a
    generator's), found on every machine that runs the tests."""
    import ast

    try:
        tree = ast.parse(module.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return ""
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)))]
    return "\n\n".join(d for d in (ast.get_docstring(n) for n in nodes) if d)


def _tree(root: Path, rnd: random.Random) -> list[Path]:
    """200 documents in 40 folders: the docstrings of the standard library's modules."""
    import sysconfig

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    modules = [m for m in sorted(stdlib.rglob("*.py"))
               if not {"test", "tests", "idlelib", "site-packages", "lib2to3"} & set(m.relative_to(stdlib).parts)]
    texts = [(".".join(m.relative_to(stdlib).with_suffix("").parts), t) for m in modules
             if len(t := _docstrings(m)) > 300]
    rnd.shuffle(texts)
    files = []
    for i, (name, body) in enumerate(texts[:200]):
        folder = root / f"folder{i % 40:02}"
        folder.mkdir(parents=True, exist_ok=True)
        p = folder / f"{name}.txt"
        p.write_text(f"{name}\n\n{body}")
        files.append(p)
    return files


QUERIES = ["http request", "json decode", "thread lock", "random number", "file path", "unicode string",
           "socket connection", "email message", "zip archive", "date time format", "regular expression",
           "temporary file", "hash function", "process signal", "compress data", "sort list", "xml parser",
           "url encode", "csv reader", "logging handler", "title:calendar", "ext:txt queue"]


def _home(tmp_path: Path, name: str, config: str = "") -> CLI:
    home = tmp_path / name
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(config)
    return CLI(home)


def test_three_shards_answer_like_one_index(tmp_path: Path):
    rnd = random.Random(19)
    docs = tmp_path / "docs"
    files = _tree(docs, rnd)
    # One text in two folders of different shards: a copy the merge must show once.
    copy_text = "Isthmus harpoon report\n\n" + " ".join(rnd.choice(WORDS) for _ in range(1000))
    (docs / "folder00" / "isthmus.txt").write_text(copy_text)
    shards = [_home(tmp_path, f"shard{i}") for i in range(3)]
    one = _home(tmp_path, "one")
    one.run("index", str(docs))
    counts = []
    for i, shard in enumerate(shards):
        summary = json.loads(shard.run("index", str(docs), "--shard", f"{i}/3", "--json").stdout)
        counts.append(summary["indexed"] + summary["reused"])
    assert len(files) >= 150 and sum(counts) == len(files) + 1 and min(counts) > 0, (len(files), counts)
    other = next(f for f in sorted(docs.iterdir()) if _shard_of(f) != _shard_of(docs / "folder00"))
    (other / "isthmus-copy.txt").write_text(copy_text)
    # And a near-copy (another text: a line more) in the third shard, which one index collapses too.
    third = next(f for f in sorted(docs.iterdir()) if _shard_of(f) not in (_shard_of(other), _shard_of(docs / "folder00")))
    (third / "isthmus-printed.txt").write_text(copy_text + "\n\nPrinted on Tuesday.")
    one.run("index", str(docs))
    for i, shard in enumerate(shards):
        shard.run("index", str(docs), "--shard", f"{i}/3")

    front = _home(tmp_path, "front", "shards = [" + ", ".join(json.dumps(str(s.home)) for s in shards) + "]\n")
    (tmp_path / "nothing-here").mkdir()
    front.run("index", str(tmp_path / "nothing-here"))  # a home of its own, empty
    same = 0
    for q in QUERIES:
        merged = front.json("search", *q.split(), "--limit", "10")
        # By the words: a search over shards finds nothing by meaning (docs/search.md, "Meaning").
        whole = one.json("search", *q.split(), "--limit", "10", "--words")
        assert merged["total"] == whole["total"], q
        hits = merged["hits"]
        # Well-formed: unique, ranked, each with a snippet holding a word of the query.
        assert len({h["uri"] for h in hits}) == len(hits) == len(whole["hits"]), q
        assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True), q
        assert all(h["snippet"] and h["path"] for h in hits), q
        same += {h["uri"] for h in hits} == {h["uri"] for h in whole["hits"]}
    assert same >= 0.9 * len(QUERIES), f"{same} of {len(QUERIES)} queries have one index's top 10"

    # `deskdex status` shows every shard and its size.
    shown = front.json("status")["shards"]
    assert [x["home"] for x in shown] == [str(x.home) for x in shards]
    assert [x["documents"] for x in shown] == [x.json("status")["documents"] for x in shards]
    assert all(x["index_bytes"] > 0 for x in shown)

    # The daemon's socket answers the same, from every shard (the tray asks it too).
    from .daemon_fixture import DaemonProcess

    alone = {q: front.json("search", *q.split(), "--limit", "10")["hits"] for q in QUERIES[:6]}
    daemon = DaemonProcess(front.home, [tmp_path / "nothing-here"],
                           extra_config=(front.home / "config" / "config.toml").read_text())
    daemon.start()
    try:
        for q, hits in alone.items():
            answered = daemon.call("search", query=q, limit=10)["hits"]
            assert [h["uri"] for h in answered] == [h["uri"] for h in hits], q
    finally:
        daemon.stop()

    # The copy and the near-copy, each in another shard, show once, standing for the others, as in one index.
    merged = front.json("search", "isthmus", "harpoon", "report")
    whole = one.json("search", "isthmus", "harpoon", "report")
    assert [(Path(h["path"]).name, h["duplicates"]) for h in merged["hits"][:1]] == \
        [(Path(h["path"]).name, h["duplicates"]) for h in whole["hits"][:1]]
    assert whole["hits"][0]["duplicates"] == merged["hits"][0]["duplicates"] == 2
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(one.home / "data" / "catalog.sqlite")) as db:
        sums = dict(db.execute("SELECT uri, text_sum FROM docs WHERE uri LIKE '%isthmus%'").fetchall())
    assert len(set(sums.values())) == 2, sums  # the near-copy's text is not the others'
    assert sum(Path(h["path"]).name.startswith("isthmus") for h in merged["hits"]) == 1


def _shard_of(folder: Path, shards: int = 3) -> int:
    """The shard `deskdex index --shard I/N` (the setting shard) puts this folder's files in."""
    from deskdex.webcrawl.urls import shard_of

    return shard_of(str(folder), shards)


def test_a_missing_shard_is_named(tmp_path: Path):
    front = _home(tmp_path, "front", f'shards = ["{tmp_path / "gone"}"]\n')
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("some words here")
    front.run("index", str(docs))
    p = front.run("search", "words", check=False)
    assert p.returncode != 0 and "shard" in p.stderr and "gone" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_shard_argument_is_checked(tmp_path: Path):
    cli = _home(tmp_path, "h")
    for bad in ("3/3", "x", "1/0", "-1/2"):
        p = cli.run("index", str(tmp_path), "--shard", bad, check=False)
        assert p.returncode == 2 and "--shard" in p.stderr, (bad, p.stderr)


def test_web_pages_sharded_by_host_are_searched_as_one(tmp_path: Path):
    """`deskdex crawl --shard I/N` puts each site's pages in the shard its host hashes to, as files
    go by folder; crawled into two homes, they are searched as one from a third. (Not compared with
    one home crawling every site: a crawl skips a page that near-duplicates one it stored, and the
    generated sites share pages, which two shards each store.)"""
    from contextlib import ExitStack

    from deskdex.webcrawl.urls import shard_of, site_of

    from .webcrawl_site import SiteServer

    with ExitStack() as stack:
        sites: list[SiteServer] = []
        # Sites until both shards have one: a host's shard is its port's hash, which no test picks.
        while len({shard_of(site_of(s.url("/")), 2) for s in sites}) < 2 or len(sites) < 3:
            assert len(sites) < 30
            sites.append(stack.enter_context(SiteServer(kind="topic", pages=12, seed=len(sites) + 1)))
        seeds = [s.url("/") for s in sites]
        shards = [_home(tmp_path, f"shard{i}") for i in range(2)]
        for i, shard in enumerate(shards):
            shard.run("crawl", *seeds, "--shard", f"{i}/2", "--allow-private", "--delay", "0.01", "--max-pages", "200")
    front = _home(tmp_path, "front", "shards = [" + ", ".join(json.dumps(str(s.home)) for s in shards) + "]\n")
    (tmp_path / "empty").mkdir()
    front.run("index", str(tmp_path / "empty"))

    held = []
    for i, shard in enumerate(shards):  # each shard holds the pages of its hosts, and only those
        uris = {h["uri"] for h in shard.json("search", "source:web", "--all", "--limit", "500")["hits"]}
        assert uris and all(shard_of(site_of(u), 2) == i for u in uris), (i, uris)
        held.append(uris)
    merged = front.json("search", "source:web", "--all", "--limit", "500")
    assert sorted(h["uri"] for h in merged["hits"]) == sorted(held[0] | held[1])
    for q in ("telescope", "galaxy orbit", "recipe", "comet nebula"):
        got = front.json("search", q, "--all", "--limit", "500")
        totals = [shard.json("search", q, "--all", "--limit", "500", "--words")["total"] for shard in shards]
        assert got["total"] == sum(totals) and len(got["hits"]) == sum(totals), q
        assert [h["score"] for h in got["hits"]] == sorted((h["score"] for h in got["hits"]), reverse=True), q
        assert {h["uri"].split("/")[2] for h in got["hits"]} <= {site_of(u) for u in seeds}, q


TOKEN = "a-test-token-of-some-length"


class Served:
    """`deskdex serve` of a home on a free port of 127.0.0.1, its output in a file."""

    def __init__(self, cli: CLI, verbose: bool = False) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        tls = "tls_cert" in (cli.home / "config" / "config.toml").read_text()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.home, self.verbose = cli.home, verbose
        self.log = cli.home / "serve.log"
        self.log.write_text("")
        self.start()

    def start(self) -> None:
        """Started (again, on the same port), once it says it serves."""
        import subprocess
        import time

        from .conftest import DESKDEX, ROOT

        started = self.log.read_text().count("serving")
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen([DESKDEX, "--home", str(self.home), "serve", "--listen",
                                          f"127.0.0.1:{self.port}", *(["-v"] if self.verbose else [])],
                                         stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + 30
        while self.log.read_text().count("serving") == started:
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.05)

    def connections(self) -> list[int]:
        """The client port of each question asked so far (its -v log): one port, one connection."""
        import re

        return [int(m) for m in re.findall(r'127\.0\.0\.1:(\d+) "POST /(?:stats|search|snippets) ', self.log.read_text())]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _post(url: str, body: bytes, token: str | None, length: int | None = None) -> tuple[int, dict[str, object]]:
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    headers = {"Content-Length": str(len(body) if length is None else length)}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    conn.request("POST", parts.path, body=body if length is None else b"", headers=headers)
    answer = conn.getresponse()
    data = answer.read()
    conn.close()
    return answer.status, json.loads(data or b"{}")


def test_a_shard_served_over_http_is_searched_as_one(tmp_path: Path):
    """A shard on another machine, reached over HTTP with a token (`deskdex serve`), answers a
    merged search as the same shard read from its folder: same hits, scores and snippets."""
    docs = tmp_path / "docs"
    _tree(docs, random.Random(23))
    shards = [_home(tmp_path, f"shard{i}", f'token = "{TOKEN}"\n') for i in range(2)]
    for i, shard in enumerate(shards):
        shard.run("index", str(docs), "--shard", f"{i}/2")
    served = Served(shards[1])
    try:
        by_folder = _home(tmp_path, "front-folders",
                          "shards = [" + ", ".join(json.dumps(str(s.home)) for s in shards[1:]) + "]\n")
        by_http = _home(tmp_path, "front-http", f'shards = ["{served.url}"]\ntoken = "{TOKEN}"\n')
        for front in (by_folder, by_http):
            front.run("index", str(docs), "--shard", "0/2")  # each front holds shard 0 itself
        for q in QUERIES:
            want = by_folder.json("search", *q.split(), "--limit", "10")
            got = by_http.json("search", *q.split(), "--limit", "10")
            assert got["total"] == want["total"], q
            assert [(h["uri"], round(h["score"], 4), h["snippet"], h["highlights"], h["duplicates"], h["related"])
                    for h in got["hits"]] == \
                   [(h["uri"], round(h["score"], 4), h["snippet"], h["highlights"], h["duplicates"], h["related"])
                    for h in want["hits"]], q
        held_there = shards[1].json("status")["documents"]
        assert by_http.json("status")["shards"] == [{"home": served.url, "documents": held_there, "served": True}]
        assert f"{held_there} documents, served" in by_http.run("status").stdout
        # A query the shard refuses is the user's error, with its position, as a local one.
        p = by_http.run("search", "title:", check=False)
        assert p.returncode != 0 and "Traceback" not in p.stderr

        # The endpoint: nothing without the token, nothing but its three questions, nothing huge.
        question = json.dumps({"terms": [["body", "http"]]}).encode()
        assert _post(served.url + "/stats", question, None)[0] == 401
        assert _post(served.url + "/stats", question, "a-wrong-token-of-some-length")[0] == 401
        status, answer = _post(served.url + "/stats", question, TOKEN)
        assert status == 200 and answer["num_docs"] == held_there and answer["freqs"][0] > 0
        assert _post(served.url + "/status", question, TOKEN)[0] == 404
        assert _post(served.url + "/search", b"{not json", TOKEN)[0] == 400
        assert _post(served.url + "/search", json.dumps({"query": 5}).encode(), TOKEN)[0] == 400
        assert _post(served.url + "/stats", b"", TOKEN, length=1 << 30)[0] == 413
        status, answer = _post(served.url + "/search", json.dumps(
            {"query": "((", "need": 10, "sort": "relevance", "collapse": True,
             "stats": {"num_docs": 1, "terms": [], "freqs": []}}).encode(), TOKEN)
        assert status == 400 and answer["code"] == "bad_query"

        # A front with the wrong token is refused, and says which shard refused it.
        wrong = _home(tmp_path, "front-wrong", f'shards = ["{served.url}"]\ntoken = "not-the-token-at-all"\n')
        wrong.run("index", str(tmp_path / "docs" / "folder00"))
        p = wrong.run("search", "http", check=False)
        assert p.returncode != 0 and served.url in p.stderr and "token" in p.stderr and "Traceback" not in p.stderr
    finally:
        served.stop()
    # Gone: the search fails, naming the shard, rather than answering without a part of the index.
    p = by_http.run("search", "http", check=False)
    assert p.returncode != 0 and served.url in p.stderr and "Traceback" not in p.stderr, p.stderr
    # Serving needs a token worth the name.
    bare = _home(tmp_path, "bare")
    bare.run("index", str(tmp_path / "docs" / "folder00"))
    p = bare.run("serve", "--listen", "127.0.0.1:1", check=False)
    assert p.returncode != 0 and "token" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_daemon_with_listen_serves_its_index(tmp_path: Path):
    import socket

    from .daemon_fixture import DaemonProcess

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"lagoon{i}.txt").write_text(f"Lagoon survey {i}: " + " ".join(random.Random(i).choice(WORDS)
                                                                                for _ in range(80)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    daemon = DaemonProcess(tmp_path / "served", [docs], extra_config=f'listen = "127.0.0.1:{port}"\ntoken = "{TOKEN}"\n')
    daemon.start()
    try:
        front = _home(tmp_path, "front", f'shards = ["http://127.0.0.1:{port}"]\ntoken = "{TOKEN}"\n')
        (tmp_path / "empty").mkdir()
        front.run("index", str(tmp_path / "empty"))
        hits = front.json("search", "lagoon", "survey")["hits"]
        assert sorted(Path(h["path"]).name for h in hits) == ["lagoon0.txt", "lagoon1.txt", "lagoon2.txt"]
        assert all("agoon" in h["snippet"] for h in hits)
    finally:
        daemon.stop()


def test_a_served_shard_keeps_its_connections(tmp_path: Path):
    """The searching side keeps its connections to a served shard: a search's three questions go
    over one connection, and a daemon's searches over the one it kept. A shard restarted meanwhile
    (the kept connection dead) is asked again on a new one, and the search goes on. A refusal before
    the request's body is read ends its connection; an answer keeps it."""
    import http.client

    from .daemon_fixture import DaemonProcess

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"lagoon{i}.txt").write_text(f"Lagoon survey {i}: " + " ".join(random.Random(i).choice(WORDS)
                                                                                for _ in range(80)))
    shard = _home(tmp_path, "shard", f'token = "{TOKEN}"\n')
    shard.run("index", str(docs))
    served = Served(shard, verbose=True)
    config = f'shards = ["{served.url}"]\ntoken = "{TOKEN}"\n'

    def found(cli: CLI) -> list[str]:
        hits = cli.json("search", "lagoon", "survey")["hits"]
        assert all("agoon" in h["snippet"] for h in hits)
        return sorted(Path(h["path"]).name for h in hits)

    try:
        (tmp_path / "empty").mkdir()
        alone = _home(tmp_path, "alone", config)  # no daemon: the command asks the shard itself
        alone.run("index", str(tmp_path / "empty"))
        assert found(alone) == ["lagoon0.txt", "lagoon1.txt", "lagoon2.txt"]
        one_search = served.connections()
        assert len(one_search) == 3 and len(set(one_search)) == 1, one_search

        daemon = DaemonProcess(tmp_path / "front", [tmp_path / "empty"], extra_config=config)
        daemon.start()
        try:
            front = CLI(daemon.home)
            for _ in range(3):
                assert found(front) == ["lagoon0.txt", "lagoon1.txt", "lagoon2.txt"]
            by_daemon = served.connections()[3:]
            assert len(by_daemon) == 9 and len(set(by_daemon)) == 1, by_daemon
            served.stop()
            served.start()
            assert found(front) == ["lagoon0.txt", "lagoon1.txt", "lagoon2.txt"]
            after = served.connections()[12:]
            assert len(after) == 3 and len(set(after)) == 1 and after[0] not in by_daemon, after
        finally:
            daemon.stop()

        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        try:
            question = json.dumps({"terms": [["body", "lagoon"]]}).encode()
            conn.request("POST", "/stats", question, {"Authorization": f"Bearer {TOKEN}"})
            answer = conn.getresponse()
            assert answer.status == 200 and json.loads(answer.read())["num_docs"] == 3 and not answer.will_close
            conn.request("POST", "/stats", question, {"Authorization": "Bearer not-the-token-at-all"})
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 401 and answer.will_close and answer.getheader("Connection") == "close"
            conn.close()
            # A chunked body is not read: refused, and the connection ended rather than read it as a request.
            conn.putrequest("POST", "/stats")
            conn.putheader("Authorization", f"Bearer {TOKEN}")
            conn.putheader("Transfer-Encoding", "chunked")
            conn.endheaders()
            conn.send(b"5\r\nhello\r\n0\r\n\r\n")
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 411 and answer.will_close
        finally:
            conn.close()
    finally:
        served.stop()


def test_two_daemons_keep_a_sharded_collection(tmp_path: Path):
    """The setting shard: a daemon per shard watches the same folders and keeps only its folders'
    files, live; a home naming both answers for the whole collection."""
    from .daemon_fixture import DaemonProcess

    docs = tmp_path / "docs"
    rnd = random.Random(29)
    for k in range(10):
        (docs / f"folder{k}").mkdir(parents=True)
        for j in range(3):
            (docs / f"folder{k}" / f"note{j}.txt").write_text(f"Estuary note {k}.{j}: " +
                                                             " ".join(rnd.choice(WORDS) for _ in range(60)))
    daemons = [DaemonProcess(tmp_path / f"shard{i}", [docs], extra_config=f'shard = "{i}/2"\n') for i in range(2)]
    for d in daemons:
        d.start()
    try:
        held = [d.search("estuary") for d in daemons]
        assert sorted(held[0] + held[1]) == sorted(str(p) for p in docs.rglob("*.txt"))  # each file once
        for i, paths in enumerate(held):
            assert paths and all(_shard_of(Path(p).parent, 2) == i for p in paths), (i, paths)
        front = _home(tmp_path, "front", "shards = [" + ", ".join(json.dumps(str(d.home)) for d in daemons) + "]\n")
        (tmp_path / "empty").mkdir()
        front.run("index", str(tmp_path / "empty"))
        assert front.json("search", "estuary", "--limit", "100")["total"] == 30

        # A file saved while both watch: indexed by its folder's shard only.
        folder = next(f for f in sorted(docs.iterdir()) if _shard_of(f, 2) == 1)
        new = folder / "saved.txt"
        new.write_text("Estuary saved while two daemons watch, with the word kittiwake.")
        daemons[1].eventually("kittiwake", [str(new)])
        assert daemons[0].search("kittiwake") == []
        assert [h["path"] for h in front.json("search", "kittiwake")["hits"]] == [str(new)]
    finally:
        for d in daemons:
            d.stop()


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "deskdex test shard")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "shard.crt", folder / "shard.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_a_shard_served_over_https(tmp_path: Path):
    """With tls_cert and tls_key the shard serves HTTPS; a home whose tls_ca holds its certificate
    searches it, one that does not trust it is refused, naming the shard, and plain HTTP gets nothing."""
    cert, key = _certificate(tmp_path)
    docs = tmp_path / "docs"
    _tree(docs, random.Random(31))
    shard = _home(tmp_path, "shard", f'token = "{TOKEN}"\ntls_cert = "{cert}"\ntls_key = "{key}"\n')
    shard.run("index", str(docs / "folder01"))
    served = Served(shard)
    try:
        assert served.url.startswith("https://")
        trusting = _home(tmp_path, "trusting", f'shards = ["{served.url}"]\ntoken = "{TOKEN}"\ntls_ca = "{cert}"\n')
        trusting.run("index", str(docs / "folder02"))
        hits = trusting.json("search", "the", "--limit", "100")["hits"]
        from_shard = [h for h in hits if "/folder01/" in h["path"]]
        assert from_shard and all(h["snippet"] for h in from_shard)
        assert len(from_shard) == len(shard.json("search", "the", "--limit", "100")["hits"])

        doubting = _home(tmp_path, "doubting", f'shards = ["{served.url}"]\ntoken = "{TOKEN}"\n')
        doubting.run("index", str(docs / "folder02"))
        p = doubting.run("search", "the", check=False)
        assert p.returncode != 0 and served.url in p.stderr and "certificate" in p.stderr.lower(), p.stderr
        assert "Traceback" not in p.stderr

        plain = served.url.replace("https://", "http://")
        import urllib.error
        import urllib.request

        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(urllib.request.Request(plain + "/stats", data=b"{}", method="POST"), timeout=5)

        # A kept TLS connection whose server was restarted (ended without TLS's goodbye: an EOF the
        # protocol forbids) is replaced, and the question answered: as a daemon's next search asks.
        from deskdex.index.remote import RemoteShard

        remote = RemoteShard(served.url, TOKEN, str(cert))
        held = remote.stats([]).num_docs
        served.stop()
        served.start()
        assert remote.stats([]).num_docs == held > 0
        remote.close()
    finally:
        served.stop()
    # A certificate that cannot be read: serving refuses to start, saying which setting.
    bad = _home(tmp_path, "bad", f'token = "{TOKEN}"\ntls_cert = "{tmp_path / "none.crt"}"\n')
    bad.run("index", str(docs / "folder01"))
    p = bad.run("serve", "--listen", "127.0.0.1:1", check=False)
    assert p.returncode != 0 and "tls_cert" in p.stderr and "Traceback" not in p.stderr, p.stderr
