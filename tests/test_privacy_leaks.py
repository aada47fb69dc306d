"""No leak across users through search results (issue 15): what a user of an enterprise-mode daemon
gets back (hits, titles, counts, scores, order, snippets, cluster ids, ``dup:``) is the same whether
or not someone else holds a private file with the same words or the same bytes.

The first tests work on a collection directly, rows stamped with readers as the enterprise-mode
indexer stamps them; the last runs the daemon with ``--system`` and real accounts (root only)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from deskdex.converters import Block, Document
from deskdex.paths import path_to_uri
from deskdex.converters.limits import Limits
from deskdex.index import Collection, Row, search
from deskdex.index.clusters import Clusters
from deskdex.index.fulltext import FIELD_BOOSTS
from deskdex.index.readable import ReadableClusters
from deskdex.pipeline.indexer import Indexer

from .accounts import IS_ROOT, Users, clients_or_skip, run_as
from .daemon_fixture import DaemonProcess

ALICE, BOB = 1001, 1002  # the attacker and the victim
NOW = 1_780_000_000


def readers(*uids: int, everyone: bool = False) -> str:
    return json.dumps({"uids": sorted(uids), "everyone": everyone})


# A first line over 120 characters: plain text takes the file's name as its title.
SECRET = ("the engineering department will be reduced by forty percent in the second quarter and the "
          "remaining teams merged into platform zebrafish\n\nnames of those affected follow below\n")


def test_a_copy_takes_no_title_or_type_from_the_file_it_copies(tmp_path: Path):
    d = tmp_path / "files"
    d.mkdir()
    (d / "2027-layoffs-engineering-dept.txt").write_text(SECRET)
    (d / "memo.txt").write_text("Quarterly memo\n\nthe canteen reopens on monday\n")
    (d / "notes.md").write_text("# Launch plan\n\nship the walrus release\n")
    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        indexer = Indexer(coll, Limits(), workers=1)
        try:
            indexer.sync([str(d)], indexer.scan([str(d)]))
            shutil.copy(d / "2027-layoffs-engineering-dept.txt", d / "copy.txt")
            shutil.copy(d / "memo.txt", d / "memo-copy.txt")
            shutil.copy(d / "notes.md", d / "notes.txt")
            summary = indexer.sync([str(d)], indexer.scan([str(d)]))
        finally:
            indexer.release()

        def row(name: str) -> Row:
            r = coll.get((d / name).as_uri())
            assert r is not None
            return r

        # Its own name, in the catalog, the index and the stored text: not the other file's.
        assert row("copy.txt").title == "copy.txt"
        assert "layoffs" not in (coll.tagged_text(row("copy.txt")) or "")
        assert [h["path"] for h in search(coll, "title:layoffs")["hits"]] == [str(d / "2027-layoffs-engineering-dept.txt")]
        # Suffixes choose the converter: a .txt copy of Markdown is plain text, titled by its first line.
        assert (row("notes.txt").mime, row("notes.txt").title) == ("text/plain", "# Launch plan")
        assert (row("notes.md").mime, row("notes.md").title) == ("text/markdown", "Launch plan")
        # A title from the content is the copy's own too: its stored text is reused, nothing converted.
        assert row("memo-copy.txt").title == "Quarterly memo" and row("memo-copy.txt").blob == row("memo.txt").blob
        assert summary.reused == 1 and summary.indexed == 2


# path, title, body, uids (empty: everyone), mtime
ALICES = [
    ("/home/alice/plan.txt", "Harbour plan", "marmalade harbour budget for the spring", (ALICE,), NOW - 50),
    ("/home/alice/jam.txt", "Marmalade jam", "marmalade marmalade and more marmalade on toast with butter", (ALICE,), NOW - 40),
    ("/home/alice/copy1.txt", "Pier", "the pier repairs need a crane and two divers marmalade", (ALICE,), NOW - 30),
    ("/home/alice/copy2.txt", "Pier", "the pier repairs need a crane and two divers marmalade", (ALICE,), NOW - 30),
    ("/home/alice/alone.txt", "Ledger", "ledger of the harbour authority for the year", (ALICE,), NOW - 20),
    ("/srv/shared/notice.txt", "Notice", "harbour closed for marmalade festival", (), NOW - 10),
    ("/home/alice/b.txt", "Tie", "harbour ferry one", (ALICE,), NOW - 5),
    ("/home/alice/a.txt", "Tie", "harbour ferry two", (ALICE,), NOW - 5),
]
BOBS = [(f"/home/bob/private{i}.txt", f"Marmalade {i}", "marmalade harbour " * (i + 1) + "ferry budget", (BOB,),
         NOW - 100 + i) for i in range(40)] + [
    ("/home/bob/ledger.txt", "Ledger", "ledger of the harbour authority for the year", (BOB,), NOW - 60),
    ("/home/bob/pier.txt", "Pier", "the pier repairs need a crane and two divers marmalade", (BOB,), NOW - 60),
]
QUERIES = ["marmalade", "harbour", "harbour OR marmalade", "marmalade -budget", "title:harbour", "marm*",
           "marmalad~", '"harbour budget"', "dup:yes", "dup:no", "harbour dup:no", "marmalade ext:txt",
           "path:/home/alice", "source:files harbour", "type:text ferry", "ledger", "ferry OR budget"]


def _put(coll: Collection, docs: list[tuple[str, str, str, tuple[int, ...], int]]) -> None:
    for path, title, body, uids, mtime in docs:
        doc = Document(uri="file://" + path, mime="text/plain", title=title, blocks=[Block.of("p", body)])
        coll.put(Row(uri="file://" + path, path=path, size=len(body), mtime=mtime,
                     readers=readers(*uids, everyone=not uids)), doc)
    coll.commit()


def _views(data: Path, reader: int | None) -> dict[str, dict]:
    out = {}
    with Collection.open(str(data)) as coll:
        for q in QUERIES:
            for kw in ({}, {"collapse": False}, {"sort": "date"}, {"limit": 2, "offset": 1}):
                args = {"limit": 50, **kw}
                out[f"{q} {kw}"] = search(coll, q, reader=reader, **args)
    return out


def _hit(view: dict, name: str) -> dict:
    return next(h for h in view["hits"] if Path(h["path"]).name == name)


def test_what_a_reader_finds_does_not_depend_on_others_documents(tmp_path: Path):
    data = tmp_path / "data"
    with Collection.open(str(data), writable=True) as coll:
        _put(coll, ALICES)
    alice_before, root_before = _views(data, ALICE), _views(data, None)
    with Collection.open(str(data), writable=True) as coll:
        _put(coll, BOBS)
    alice_after, root_after = _views(data, ALICE), _views(data, None)
    for key, before in alice_before.items():
        assert alice_after[key] == before, key

    # Scores: the weights of the fields matched, "marmalade" in the title and the body (0.1 x 1).
    marmalade = alice_after["marmalade {}"]
    assert [(Path(h["path"]).name, h["score"]) for h in marmalade["hits"]] == [
        ("jam.txt", pytest.approx(FIELD_BOOSTS["title"] + 0.1)), ("notice.txt", 1.0), ("copy1.txt", 1.0),
        ("plan.txt", 1.0)]
    # Equal scores: the newest first, then by URI (copy1 before copy2, a before b).
    assert [Path(h["path"]).name for h in alice_after["ferry OR budget {}"]["hits"]] == ["a.txt", "b.txt", "plan.txt"]
    # Alice's two copies are one hit standing for one duplicate; her ledger's duplicate is Bob's alone.
    assert _hit(marmalade, "copy1.txt")["duplicates"] == 1 and _hit(marmalade, "copy1.txt")["cluster"] != 0
    assert (_hit(alice_after["ledger {}"], "alone.txt")["cluster"], _hit(alice_after["ledger {}"], "alone.txt")[
        "duplicates"]) == (0, 0)
    assert {Path(h["path"]).name for h in alice_after["dup:yes {'collapse': False}"]["hits"]} == {"copy1.txt", "copy2.txt"}

    # Root sees BM25, which Bob's documents moved, and every duplicate.
    key = "marmalade {'collapse': False}"
    assert _hit(root_after[key], "jam.txt")["score"] != _hit(root_before[key], "jam.txt")["score"]
    assert _hit(root_after["ledger {'collapse': False}"], "alone.txt")["duplicates"] == 1
    assert _hit(root_after["dup:yes {'collapse': False}"], "copy1.txt")["duplicates"] == 2


def test_a_bridge_through_another_users_document_joins_nothing(tmp_path: Path):
    # 1 ~ 2 ~ 3 near-duplicates (edges only through 2), 4 and 5 exact copies; 2 and 5 are Bob's.
    conn = sqlite3.connect(tmp_path / "c.sqlite")
    conn.execute("CREATE TABLE docs(id INTEGER PRIMARY KEY, uri TEXT, cluster INTEGER, readers TEXT)")
    clusters = Clusters(conn)
    clusters.add(1, [])
    clusters.add(2, [1])
    clusters.add(3, [2])
    clusters.add(4, [], group="g")
    clusters.add(5, [], group="g")
    clusters.add(6, [], group="g")
    for doc in range(1, 7):
        conn.execute("INSERT INTO docs VALUES(?,?,?,?)", (doc, f"u{doc}", clusters.cluster_of(doc),
                                                          readers(BOB) if doc in (2, 5) else readers(ALICE)))
    alice = ReadableClusters(conn, ALICE)
    assert [alice.component(f"u{d}", 1) for d in (1, 3)] == [[1], [3]]
    assert alice.cluster_id("u6", 4) == 4 and alice.component("u6", 4) == [4, 6]
    assert alice.with_duplicates() == ["u4", "u6"]
    assert ReadableClusters(conn, BOB).with_duplicates() == []
    conn.close()


needs_root = pytest.mark.skipif(not IS_ROOT, reason="makes real accounts and runs their clients: needs root")


@pytest.mark.slow
@needs_root
def test_an_attacker_learns_nothing_of_a_victims_private_files(open_dir: Path):
    """Alice probes for a private file of Bob's: a copy of its bytes, the words it holds. Her answers
    are the same, to the byte, before Bob has the file and once the daemon has indexed it."""
    py, lib = clients_or_skip(open_dir)
    users = Users()
    daemon = None
    try:
        pa, pb = users.create()
        ha, hb = Path(pa.pw_dir), Path(pb.pw_dir)
        ha.chmod(0o700)
        hb.chmod(0o755)

        def put(path: Path, text: str, owner: pwd.struct_passwd, mtime: int) -> None:
            # 0600 and its owner's from the start, its date set before it is closed: the daemon never
            # sees it readable by another, nor with another date.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.fchown(fd, owner.pw_uid, owner.pw_gid)
                os.write(fd, text.encode())
                os.utime(fd, (mtime, mtime))
            finally:
                os.close(fd)

        now = int(time.time()) - 1000
        pier = "the pier repairs need a crane and two divers before the marmalade festival\n"
        put(ha / "pier1.txt", pier, pa, now - 30)
        put(ha / "pier2.txt", pier, pa, now - 20)
        put(ha / "probe.txt", "marmalade zebrafish harbour budget for the spring\n", pa, now - 10)
        put(ha / "guess.txt", SECRET, pa, now)

        home = open_dir / "home"
        names = ", ".join(json.dumps(n) for n in (users.a, users.b))
        daemon = DaemonProcess(home, [], extra_config=f"accounts = [{names}]\n", args=("--system",))
        daemon.start()

        requests = [{"op": "search", "query": q, "limit": 50, **extra}
                    for q in ("zebrafish", "marmalade", "marmalade OR zebrafish", "title:layoffs", "layoffs",
                              "dup:yes", "dup:no", "pier", "harbour OR pier")
                    for extra in ({}, {"all": True})]
        # The tray's expand, public: the others of a cluster that she may read, nothing of Bob's.
        secret_name = "2027-layoffs-engineering-dept.txt"
        requests += [{"op": "duplicates", "uri": path_to_uri(str(p))}
                     for p in (ha / "pier1.txt", ha / "guess.txt", hb / secret_name, hb / "pier-copy.txt")]
        # Her status: counts of what she may read, no totals.
        requests.append({"op": "status"})
        client = ("import json,socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f=s.makefile('rwb');"
                  "[(f.write(json.dumps(r).encode()+b'\\n'), f.flush(), print(f.readline().decode().strip())) for r in "
                  "json.loads(sys.argv[2])]")

        def alice() -> list[object]:
            p = run_as(users.a, [py, "-c", client, daemon.socket, json.dumps(requests)], lib, ha)
            assert p.returncode == 0, p.stderr
            answers = [json.loads(line) for line in p.stdout.splitlines()]
            assert all(a["ok"] for a in answers), answers
            return answers

        def root_hits(query: str) -> dict[str, dict[str, object]]:
            return {Path(h["path"]).name: h for h in daemon.call("search", query=query, limit=50, all=True)["hits"]}

        def wait(cond: object, what: str) -> None:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if cond():  # type: ignore[operator]
                    return
                time.sleep(0.2)
            raise AssertionError(f"waited for {what}\n{daemon.log.read_text()[-3000:]}")

        before = alice()
        assert [a["result"]["paths"] for a in before[-5:-1]] == [[str(ha / "pier2.txt")], [], [], []]
        root_before = root_hits("marmalade")
        assert "guess.txt" in {h["title"] for h in before[0]["result"]["hits"]}

        # Alice's guess goes; Bob's private files come, then her guess again, the same bytes and dates.
        (ha / "guess.txt").unlink()
        wait(lambda: "guess.txt" not in root_hits("zebrafish"), "guess.txt gone")
        put(hb / secret_name, SECRET, pb, now)
        put(hb / "pier-copy.txt", pier, pb, now)
        put(hb / "jam.txt", "marmalade " * 60 + "zebrafish\n", pb, now)
        wait(lambda: {secret_name, "jam.txt"} <= set(root_hits("zebrafish")) and "pier-copy.txt" in root_hits("pier"),
             "Bob's files indexed")
        put(ha / "guess.txt", SECRET, pa, now)
        wait(lambda: root_hits("zebrafish").get("guess.txt", {}).get("mtime") == now, "guess.txt indexed again")

        after = alice()
        for request, b, a in zip(requests, before, after):
            if request["op"] == "status":  # the daemon's state and clock are everyone's
                b, a = ({k: v for k, v in x["result"].items() if k not in ("state", "queue", "uptime", "last_commit")}
                        for x in (b, a))
            assert a == b, request
        assert after[-1]["result"]["documents"] == 4 and after[-1]["result"]["index_bytes"] is None

        # Root: real BM25 (Bob's words changed it) and every duplicate.
        root_after = root_hits("marmalade")
        assert root_after["probe.txt"]["score"] != root_before["probe.txt"]["score"]
        assert root_after["pier1.txt"]["duplicates"] == 2
        guess = root_hits("zebrafish")["guess.txt"]
        assert (guess["title"], guess["duplicates"]) == ("guess.txt", 1)
    finally:
        if daemon is not None and daemon.proc is not None:
            daemon.stop()
        users.remove()


def test_the_passage_shown_does_not_depend_on_others_documents(tmp_path: Path):
    # tantivy weighs each word of a snippet by how many documents hold it: over the whole index,
    # Bob's documents full of "alpha" would move Alice's snippet to the passage with "beta".
    data = tmp_path / "data"
    filler = " ".join(f"word{i}" for i in range(120))
    with Collection.open(str(data), writable=True) as coll:
        _put(coll, [("/home/alice/far.txt", "Far", f"alpha report {filler} beta summary", (ALICE,), NOW)])

    def snippet() -> str:
        with Collection.open(str(data)) as coll:
            return search(coll, "alpha OR beta", reader=ALICE)["hits"][0]["snippet"]

    before = snippet()
    with Collection.open(str(data), writable=True) as coll:
        _put(coll, [(f"/home/bob/{i}.txt", "A", "alpha", (BOB,), NOW) for i in range(30)])
    assert snippet() == before and before.startswith("alpha report")
