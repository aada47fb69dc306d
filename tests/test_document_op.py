"""The ``document`` op (issue 30): one indexed document's metadata and its text block by block, with
the page each block is on and the places where a query's terms match, asked of a real daemon over
its socket; rights as a search's, on a collection stamped with readers and on a system daemon with
real accounts, where a document another account may not read is answered exactly as one not
indexed."""

from __future__ import annotations

import io
import json
import os
import pwd
import time
import zipfile
from pathlib import Path

import pytest

from deskdex.converters import Block, Document
from deskdex.errors import BadArgs, NotFound, QueryError
from deskdex.index import Collection, Row, document
from deskdex.paths import path_to_uri

from .accounts import IS_ROOT, Users, clients_or_skip, run_as
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess
from .test_pages import three_page_pdf


def spans(text: str, *words: str) -> list[list[int]]:
    """Where each of ``words`` starts in ``text``, as marks."""
    return sorted([text.index(w), text.index(w) + len(w)] for w in words)


@pytest.mark.slow  # a daemon
def test_document_through_the_socket(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "birds.pdf").write_bytes(three_page_pdf())
    (docs / "broken.pdf").write_bytes(three_page_pdf()[:300])  # truncated: a failed conversion
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("inner/kestrels.txt", "Kestrels hover over the meadow.\n\nThey hunt voles at dusk.\n")
    (docs / "bundle.zip").write_bytes(buf.getvalue())
    d = DaemonProcess(tmp_path / "home", [docs]).start()
    try:
        birds = path_to_uri(str(docs / "birds.pdf"))
        got = d.call("document", uri=birds, query="bittern OR reeds")
        assert {k: got[k] for k in ("uri", "path", "title", "mime", "pages", "source", "duplicates", "similar",
                                    "truncated")} == {
            "uri": birds, "path": str(docs / "birds.pdf"), "title": "Marsh birds", "mime": "application/pdf",
            "pages": 3, "source": "files", "duplicates": 0, "similar": 0, "truncated": False}
        assert got["size"] == (docs / "birds.pdf").stat().st_size and got["mtime"] == int((docs / "birds.pdf").stat().st_mtime)
        blocks = [(b["kind"], b["text"], b["page"], b["marks"]) for b in got["blocks"]]
        bitterns, rails = "Bitterns boom at dusk on the second page.", "Rails hide in the reeds on the third."
        assert blocks == [
            ("h", "Marsh birds", 1, []),
            ("p", "Herons stand still in the shallows of the first page.", 1, []),
            ("p", bitterns, 2, spans(bitterns, "Bitterns")),  # stems: bittern finds Bitterns
            ("h", "Reed dwellers", 3, spans("Reed dwellers", "Reed")),
            ("p", rails, 3, spans(rails, "reeds")),
        ]
        assert got["marks"] == 3 and all(b["boilerplate"] is False and b["level"] in (0, 1) for b in got["blocks"])

        # A phrase marks its words where they stand together only; a field filter marks nothing.
        phrase = d.call("document", uri=birds, query='"first page" ext:pdf')
        assert [b["marks"] for b in phrase["blocks"] if b["marks"]] == [
            spans("Herons stand still in the shallows of the first page.", "first", "page")]

        meta = d.call("document", uri=birds, text=False)  # the download's question: no text read
        assert meta["blocks"] == [] and meta["marks"] == 0 and meta["pages"] == 3 and meta["path"] == got["path"]
        cut = d.call("document", uri=birds, max_blocks=2)
        assert len(cut["blocks"]) == 2 and cut["truncated"] is True and cut["blocks"][1]["marks"] == []

        member = d.call("document", uri=path_to_uri(str(docs / "bundle.zip")) + "#inner/kestrels.txt", query="vole")
        assert [(b["text"], b["marks"], b["page"]) for b in member["blocks"]] == [
            ("Kestrels hover over the meadow.", [], None), ("They hunt voles at dusk.", [[10, 15]], None)]
        assert member["pages"] is None and member["title"]

        broken = d.call("document", uri=path_to_uri(str(docs / "broken.pdf")), query="bittern")
        assert broken["blocks"] == [] and broken["path"] == str(docs / "broken.pdf")

        with pytest.raises(NotFound, match="^no such document$"):
            d.call("document", uri=path_to_uri(str(docs / "absent.pdf")))
        with pytest.raises(QueryError) as bad:
            d.call("document", uri=birds, query="bittern (reeds")
        assert bad.value.position is not None
        with pytest.raises(BadArgs, match="max_blocks must be at least 1"):
            d.call("document", uri=birds, max_blocks=0)
        with pytest.raises(BadArgs, match="uri must be at most 8192 characters"):
            d.call("document", uri="file:///" + "a" * 9000)
        assert d.call("status")["state"] in ("idle", "indexing")  # the daemon goes on
    finally:
        d.stop()


ALICE, BOB = 1001, 1002


def test_rights_as_a_search_on_a_stamped_collection(tmp_path: Path) -> None:
    """A reader gets a document it may read; another's is NotFound with the message of one not
    indexed; copies are counted among what the reader may read."""
    text = "harbour pier repairs need a crane"
    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        for path, uids in (("/home/alice/pier.txt", [ALICE]), ("/home/alice/pier2.txt", [ALICE]),
                           ("/home/bob/pier.txt", [BOB])):
            coll.put(Row(uri="file://" + path, path=path, size=len(text), mtime=1_700_000_000, mime="text/plain",
                         title="Pier", readers=json.dumps({"uids": uids, "everyone": False})),
                     Document(uri="file://" + path, mime="text/plain", title="Pier", blocks=[Block.of("p", text)]))
        coll.commit()
    with Collection.open(str(tmp_path / "data")) as coll:
        mine = document(coll, "file:///home/alice/pier.txt", "crane", reader=ALICE)
        assert mine["blocks"][0]["marks"] == spans(text, "crane")
        assert mine["duplicates"] == 1  # her other copy; not Bob's
        assert document(coll, "file:///home/alice/pier.txt", reader=None)["duplicates"] == 2  # root: all
        with pytest.raises(NotFound) as theirs:
            document(coll, "file:///home/bob/pier.txt", reader=ALICE)
        with pytest.raises(NotFound) as absent:
            document(coll, "file:///home/bob/nothing.txt", reader=ALICE)
        assert str(theirs.value) == str(absent.value)


def test_marks_as_snippets_find_them(tmp_path: Path) -> None:
    """Accents, stems, prefixes, fuzzy words and CJK runs are marked where the index matched them;
    a block the query does not touch has none."""
    texts = ["Le Café ouvre à huit heures.", "Configuration files configure everything.", "全文検索の仕組み",
             "Nothing to see here.", "A serch engine, misspelt."]
    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        coll.put(Row(uri="file:///m.txt", path="/m.txt", size=1, mtime=1_700_000_000, mime="text/plain", title="m"),
                 Document(uri="file:///m.txt", mime="text/plain", title="m", blocks=[Block.of("p", t) for t in texts]))
        coll.commit()
    with Collection.open(str(tmp_path / "data")) as coll:
        def marks(query: str) -> list[list[list[int]]]:
            return [b["marks"] for b in document(coll, "file:///m.txt", query)["blocks"]]

        assert marks("cafe") == [spans(texts[0], "Café"), [], [], [], []]
        assert marks("config*")[1] == spans(texts[1], "Configuration", "configure")
        assert marks("検索")[2] == [[2, 4]]
        assert marks("search~")[4] == spans(texts[4], "serch")
        assert marks("ext:txt -nothing") == [[]] * 5


REQUEST = ("import json,socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f=s.makefile('rwb');"
           "[(f.write(json.dumps(r).encode()+b'\\n'), f.flush(), print(f.readline().decode().strip())) for r in "
           "json.loads(sys.argv[2])]")


@pytest.mark.slow
@pytest.mark.skipif(not IS_ROOT, reason="needs root: useradd, setpriv, the system daemon")
@pytest.mark.timeout(BUSY_TIMEOUT)
def test_system_daemon_answers_another_accounts_document_as_not_indexed(open_dir: Path) -> None:
    py, lib = clients_or_skip(open_dir)
    users = Users()
    daemon = None
    try:
        pa, pb = users.create()
        ha, hb = Path(pa.pw_dir), Path(pb.pw_dir)
        hb.chmod(0o755)

        def put(path: Path, text: str, owner: pwd.struct_passwd, mode: int) -> None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            try:
                os.fchown(fd, owner.pw_uid, owner.pw_gid)
                os.write(fd, text.encode())
            finally:
                os.close(fd)

        put(ha / "okapi.txt", "the okapi sanctuary budget is secret\n", pa, 0o600)
        put(hb / "shared.txt", "okapi sightings open to all\n", pb, 0o644)
        home = open_dir / "home"
        names = ", ".join(json.dumps(n) for n in (users.a, users.b))
        daemon = DaemonProcess(home, [], extra_config=f"accounts = [{names}]\n", args=("--system",))
        daemon.start()
        deadline = time.monotonic() + 60
        while len(daemon.call("search", query="okapi")["hits"]) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        secret, shared = path_to_uri(str(ha / "okapi.txt")), path_to_uri(str(hb / "shared.txt"))
        absent = path_to_uri(str(ha / "absent.txt"))
        requests = [{"op": "document", "uri": u, "query": "okapi"} for u in (secret, shared, absent)]

        def ask(user: str) -> list[dict[str, object]]:
            p = run_as(user, [py, "-c", REQUEST, daemon.socket, json.dumps(requests)], lib, None)
            assert p.returncode == 0, p.stderr
            return [json.loads(line) for line in p.stdout.splitlines()]

        alice, bob = ask(users.a), ask(users.b)
        assert alice[0]["ok"] and alice[0]["result"]["blocks"][0]["marks"] == [[4, 9]]
        assert alice[1]["ok"] and bob[1]["ok"]  # the shared file: both
        # Bob asks for Alice's private file: the very answer of a file not indexed.
        assert bob[0] == bob[2] == {"ok": False, "error": {"code": "not_found", "message": "no such document"}}
        assert daemon.call("document", uri=secret)["path"] == str(ha / "okapi.txt")  # root reads all
    finally:
        if daemon is not None and daemon.proc is not None:
            daemon.stop()
        users.remove()
