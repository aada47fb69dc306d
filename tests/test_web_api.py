"""The REST API end to end (docs/web.md, issue 30): a real daemon with its web UI on 127.0.0.1 in
token mode, a few real files, and an HTTP client holding the token's cookie, as a script or the
page's own code uses it: search with highlights and facets, a document's blocks and marks,
duplicates, similar documents, status, the owner's watch/exclude/pause/resume with the CSRF header,
the socket's error codes with their HTTP statuses, and the OpenAPI description."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from deskdex.paths import path_to_uri

from .daemon_fixture import BUSY_TIMEOUT
from .test_dups_cli import text
from .test_dups_kinds import edited
from .test_pages import three_page_pdf
from .web_fixture import Web, start_web

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]  # one daemon for the module


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    root = tmp_path_factory.mktemp("webapi")
    docs = root / "docs"
    docs.mkdir()
    (docs / "notes.txt").write_text("Harbour notes\n\n" + text(11))
    shutil.copy(docs / "notes.txt", docs / "Copy of notes.txt")  # a duplicate
    words = text(12, 400).split()
    (docs / "ledger.txt").write_text("Ledger\n\n" + " ".join(words))
    (docs / "ledger-edited.txt").write_text("Ledger\n\n" + edited(words, 0.2, 29))  # similar to ledger.txt
    (docs / "birds.pdf").write_bytes(three_page_pdf())
    (docs / "Rezept.txt").write_text("Kuchen backen\n\nDer Teig wird mit Butter, Zucker und Mehl gerührt und "
                                     "dann im Ofen gebacken, bis der Kuchen goldbraun ist.\n")
    (root / "more").mkdir()
    (root / "more" / "tern.txt").write_text("Arctic terns fly from pole to pole.\n")
    w = start_web(root / "home", [docs])
    w.daemon.eventually("kuchen", [str(docs / "Rezept.txt")])
    yield w
    w.close()


def docs_of(web: Web) -> Path:
    return Path(web.daemon.home).parent / "docs"


def ok(r: httpx.Response) -> Any:
    assert r.status_code == 200, f"{r.request.method} {r.request.url}: {r.status_code} {r.text[:2000]}"
    assert r.headers["content-type"].startswith("application/json")
    return r.json()


def error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, f"{r.request.url}: {r.status_code} {r.text[:2000]}"
    assert r.headers["content-type"].startswith("application/json")
    got: dict[str, Any] = r.json()["error"]
    assert got["code"] == code and got["message"], got
    return got


def test_search_answers_hits_with_highlights_and_facets(web: Web) -> None:
    docs = docs_of(web)
    found = ok(web.client.get("/api/search", params={"q": "ledger", "facets": "1", "limit": 20}))
    paths = {h["path"] for h in found["hits"]}
    assert {str(docs / "ledger.txt"), str(docs / "ledger-edited.txt")} <= paths
    assert found["total"] == len(found["hits"]) + 1  # the copy of notes.txt, folded into its original
    for hit in found["hits"]:
        assert hit["uri"] == path_to_uri(hit["path"]) and hit["mime"] == "text/plain" and hit["size"] > 0
        assert hit["highlights"], hit
        # Each highlight is where the query's word stands in the snippet (stemmed, any case).
        assert all(hit["snippet"][a:b].lower().startswith("ledger") for a, b in hit["highlights"]), hit

    facets = found["facets"]
    assert facets["counted"] == found["total"]
    assert sum(f["count"] for f in facets["type"]) == found["total"]
    # A facet's filter narrows the query to exactly its count.
    for f in facets["type"] + facets["folder"]:
        narrowed = ok(web.client.get("/api/search", params={"q": f"ledger {f['filter']}", "limit": 1}))
        assert narrowed["total"] == f["count"], (f, narrowed["total"])
    assert [f["value"] for f in facets["folder"]] == [str(docs)]

    # Without facets=1 a search costs what it did: no facets.
    assert "facets" not in ok(web.client.get("/api/search", params={"q": "ledger"})) or \
        ok(web.client.get("/api/search", params={"q": "ledger"}))["facets"] is None


def test_search_pages_and_sorts(web: Web) -> None:
    everything = ok(web.client.get("/api/search", params={"q": "harbour", "limit": 50}))
    assert everything["total"] >= 3
    first = ok(web.client.get("/api/search", params={"q": "harbour", "limit": 1}))
    second = ok(web.client.get("/api/search", params={"q": "harbour", "limit": 1, "offset": 1}))
    assert len(first["hits"]) == len(second["hits"]) == 1
    assert first["hits"][0]["uri"] != second["hits"][0]["uri"]
    by_size = ok(web.client.get("/api/search", params={"q": "harbour", "limit": 50, "sort": "size"}))
    sizes = [h["size"] for h in by_size["hits"]]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) == len(everything["hits"])
    bare = ok(web.client.get("/api/search", params={"q": "harbour", "snippets": "0"}))
    assert all(not h["snippet"] for h in bare["hits"])


def test_document_answers_blocks_with_pages_and_marks(web: Web) -> None:
    birds = path_to_uri(str(docs_of(web) / "birds.pdf"))
    doc = ok(web.client.get("/api/document", params={"uri": birds, "q": "bittern OR reeds"}))
    assert (doc["uri"], doc["title"], doc["mime"], doc["pages"]) == (birds, "Marsh birds", "application/pdf", 3)
    marked = [(b["text"][a:z], b["page"]) for b in doc["blocks"] for a, z in b["marks"]]
    assert ("Bitterns", 2) in marked and ("reeds", 3) in marked
    assert doc["marks"] == len(marked)
    assert [b["page"] for b in doc["blocks"]] == sorted(b["page"] for b in doc["blocks"])

    meta = ok(web.client.get("/api/document", params={"uri": birds, "text": "0"}))
    assert meta["blocks"] == [] and meta["pages"] == 3


def test_duplicates_and_similar(web: Web) -> None:
    docs = docs_of(web)
    dups = ok(web.client.get("/api/duplicates", params={"uri": path_to_uri(str(docs / "notes.txt"))}))
    assert dups["paths"] == [str(docs / "Copy of notes.txt")]
    similar = ok(web.client.get("/api/similar", params={"uri": path_to_uri(str(docs / "ledger.txt"))}))
    assert str(docs / "ledger-edited.txt") in [h["path"] for h in similar["hits"]]
    assert str(docs / "birds.pdf") not in [h["path"] for h in similar["hits"]]
    hit = next(h for h in ok(web.client.get("/api/search", params={"q": "harbour notes", "limit": 50}))["hits"]
               if h["path"] in (str(docs / "notes.txt"), str(docs / "Copy of notes.txt")))
    assert hit["duplicates"] == 1  # a search shows one of the copies, counting the other


def test_status(web: Web) -> None:
    status = ok(web.client.get("/api/status"))
    assert status["documents"] == len(list(docs_of(web).iterdir()))
    assert status["system"] is False and status["paused"] is False
    assert status["folders"] == [str(docs_of(web))]
    assert "failures" in ok(web.client.get("/api/status", params={"failures": "1"}))


def wait_until(what: str, check: Any, seconds: float = 120) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"waited {seconds} s for {what}")


def test_watch_and_exclude_add_and_remove(web: Web) -> None:
    more = docs_of(web).parent / "more"
    listed = ok(web.client.get("/api/watch"))
    assert [f["path"] for f in listed["folders"]] == [str(docs_of(web))]

    added = ok(web.post("/api/watch", json={"path": str(more)}))
    assert str(more) in [f["path"] for f in added["folders"]]
    assert str(more) in [f["path"] for f in ok(web.client.get("/api/watch"))["folders"]]
    wait_until("the new folder's file to be found", lambda: ok(web.client.get(
        "/api/search", params={"q": "terns"}))["total"] == 1)
    removed = ok(web.post("/api/watch", json={"path": str(more), "remove": True}))
    assert [f["path"] for f in removed["folders"]] == [str(docs_of(web))]
    wait_until("the removed folder's file to leave the index", lambda: ok(web.client.get(
        "/api/search", params={"q": "terns"}))["total"] == 0)

    assert ok(web.post("/api/exclude", json={"pattern": "*.bak"}))["exclude"] == ["*.bak"]
    assert ok(web.client.get("/api/exclude"))["exclude"] == ["*.bak"]
    assert ok(web.post("/api/exclude", json={"pattern": "*.bak", "remove": True}))["exclude"] == []

    # A relative folder, or no pattern at all, is the socket's bad_args.
    error(web.post("/api/watch", json={"path": "relative/folder"}), 400, "bad_args")
    error(web.post("/api/exclude", json={}), 400, "bad_args")
    error(web.post("/api/watch", content=b"not json", headers={"content-type": "application/json"}), 400, "bad_args")
    error(web.post("/api/watch", json=["a list"]), 400, "bad_args")


def test_pause_and_resume_take_the_csrf_header(web: Web) -> None:
    paused = ok(web.post("/api/pause"))
    try:
        assert paused["paused"] is True
        assert ok(web.client.get("/api/status"))["paused"] is True
    finally:
        resumed = ok(web.post("/api/resume"))
    assert resumed["paused"] is False and ok(web.client.get("/api/status"))["paused"] is False
    # The CSRF token is the page's <meta name="csrf">: without it, the same call is refused.
    error(web.client.post("/api/pause"), 403, "forbidden")
    assert ok(web.client.get("/api/status"))["paused"] is False
    # GET does not act.
    assert web.client.get("/api/pause").status_code == 405


def test_errors_carry_the_sockets_codes_and_http_statuses(web: Web) -> None:
    c = web.client
    bad = error(c.get("/api/search", params={"q": "harbour AND (ledger"}), 400, "bad_query")
    assert bad["position"] == len("harbour AND ")  # where the unclosed parenthesis opens
    error(c.get("/api/search", params={"q": "harbour", "limit": "ten"}), 400, "bad_args")
    error(c.get("/api/search", params={"q": "harbour", "limit": "0"}), 400, "bad_args")
    error(c.get("/api/search", params={"q": "harbour", "offset": "-1"}), 400, "bad_args")
    error(c.get("/api/search", params={"q": "harbour", "sort": "colour"}), 400, "bad_args")
    error(c.get("/api/document", params={"uri": path_to_uri(str(docs_of(web) / "none.txt"))}), 404, "not_found")
    for endpoint in ("/api/document", "/api/duplicates", "/api/similar"):  # no uri: named, not looked up
        assert "uri" in error(c.get(endpoint), 400, "bad_args")["message"]
    # The socket's duplicates op answers a document it does not know with none.
    assert ok(c.get("/api/duplicates", params={"uri": path_to_uri("/etc/passwd")})) == {"paths": []}
    with web.anonymous() as stranger:
        error(stranger.get("/api/search", params={"q": "harbour"}), 401, "unauthenticated")
    assert c.get("/api/no-such-endpoint").status_code == 404


def test_openapi_describes_every_endpoint(web: Web) -> None:
    spec = ok(web.client.get("/api/openapi.json"))
    assert spec["openapi"].startswith("3.1")
    from openapi_spec_validator import validate

    validate(spec)  # raises on an invalid description

    from deskdex.web.app import Options, WebApp

    class NoBackend:
        def call(self, op: str, args: dict[str, Any], account: Any) -> Any:
            raise AssertionError("not called")

    # Every /api/ route the application serves (its own table), with its methods.
    app = WebApp(NoBackend(), Options(system=False, token="t" * 32, session_hours=1, pam_service="deskdex", tls=False))
    served = {(r.path, m.lower()) for r in app.app.routes if getattr(r, "path", "").startswith("/api/")
              for m in getattr(r, "methods", None) or () if m != "HEAD"}
    described = {(path, method) for path, ops in spec["paths"].items() for method in ops}
    assert described == served - {("/api/openapi.json", "get")}, (served ^ described)

    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            assert op["summary"] and op["operationId"] and "200" in op["responses"], (path, method)
            for p in op.get("parameters", []):
                assert p["in"] == "query" and p["schema"].get("type"), (path, method, p)
    search = {p["name"]: p for p in spec["paths"]["/api/search"]["get"]["parameters"]}
    assert {"q", "limit", "offset", "sort", "facets"} <= set(search)
    assert search["limit"]["schema"]["maximum"] == 10_000 and search["sort"]["schema"]["enum"]
    codes = spec["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"]
    assert {"bad_query", "bad_args", "forbidden", "not_found", "busy", "unauthenticated"} <= set(codes)
    # Operation ids are unique, as OpenAPI requires.
    ids = [op["operationId"] for ops in spec["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    assert re.fullmatch(r"\d+\.\d+.*", spec["info"]["version"]), spec["info"]


def test_the_token_redirect_keeps_the_query(web: Web) -> None:
    """The desktop's "show all" (GNOME's LaunchSearch, clients/shellsearch.py) opens the page with
    the token and the query: the redirect that drops the token keeps ``q``, and sets the cookie."""
    with web.anonymous() as c:
        r = c.get("/", params={"token": web.token, "q": "budget report", "sort": "date"})
        assert r.status_code == 303, r.text
        assert r.headers["location"] == "/?q=budget+report&sort=date"
        assert "deskdex_token" in r.headers.get("set-cookie", "")
        r = c.get("/", params={"token": web.token})
        assert r.status_code == 303 and r.headers["location"] == "/"
