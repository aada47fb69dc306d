"""What crosses the broker (deskdex.cluster.wire): a converted file's outcomes, duplicate features
included, come back as they left; a message that is not deskdex's is refused with BadMessage,
never turned into a document or an exception of another kind."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from deskdex.cluster import wire
from deskdex.converters import Limits, Source, convert
from deskdex.converters.limits import OcrOptions
from deskdex.index.features import enrich

from .conftest import make_docx
from .test_dups_cli import text


def test_outcomes_round_trip_through_json(tmp_path: Path):
    path = make_docx(tmp_path / "report.docx", "Quarterly report", "Ann", "Results", [text(3), text(4)],
                     table=[["a", "b"], ["1", "2"]])
    outcomes = convert(Source.from_path(path))
    enrich(outcomes)
    back = wire.outcomes_from_wire(json.loads(json.dumps(wire.outcomes_to_wire(outcomes))))
    assert len(back) == len(outcomes) >= 1
    for a, b in zip(outcomes, back):
        assert (a.uri, a.reason, a.message) == (b.uri, b.reason, b.message)
        assert a.document is not None and b.document is not None
        assert (a.document.title, a.document.meta, a.document.body_text()) == \
            (b.document.title, b.document.meta, b.document.body_text())
        fa, fb = a.extra["features"], b.extra["features"]
        assert (fa.group, fa.fp) == (fb.group, fb.fp) and np.array_equal(fa.fps, fb.fps)


def test_failures_and_limits_round_trip():
    limits = Limits(time_seconds=5.0, memory_bytes=2**28, ocr=OcrOptions(enabled=False, languages=("deu", "eng")))
    assert wire.limits_from_wire(json.loads(json.dumps(wire.limits_to_wire(limits)))) == limits
    src = Source(uri="file:///x/y.bin", name="y.bin", data=b"\x00\xff bytes")
    assert wire.source_from_wire(json.loads(json.dumps(wire.source_to_wire(src)))) == src


@pytest.mark.parametrize("bad", [
    [], [{}], [{"uri": 3, "document": "<not-xml"}], [{"uri": "file:///a", "document": "<doc><unclosed></doc>"}],
    [{"uri": "file:///a", "features": {"group": None, "fp": 1, "fps": "!!not base64!!"}}], "a string", None,
])
def test_bad_outcomes_are_refused(bad: object):
    with pytest.raises(wire.BadMessage):
        wire.outcomes_from_wire(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [{}, {"uri": "u"}, {"uri": "u", "name": "n", "data": "%%%"}, {"uri": "u", "name": "n",
                                                                                               "depth": "deep"}])
def test_bad_sources_and_limits_are_refused(bad: dict[str, object]):
    with pytest.raises(wire.BadMessage):
        wire.source_from_wire(bad)
    with pytest.raises(wire.BadMessage):
        wire.limits_from_wire({"time_seconds": 1.0, "no_such_limit": 2})


def test_a_request_and_its_page_round_trip():
    from deskdex.webcrawl.fetch import FetchSettings
    from deskdex.webcrawl.frontier import Request
    from deskdex.webcrawl.sink import FetchedPage, KnownPage

    req = Request("http://example.org/a?b=1", 3, kind="revisit")
    known = KnownPage(req.url, etag='"x1"', last_modified="Mon, 01 Jan 2024 00:00:00 GMT", fetched_at=17.5, size=9)
    settings = FetchSettings(timeout=2.0, deadline=5.0, allow_private=True)
    job = wire.fetch_from_wire(json.loads(json.dumps(wire.fetch_to_wire(req, known, settings, 1024, 0.3, Limits()))))
    assert (job.req.url, job.req.depth, job.req.kind) == (req.url, 3, "revisit")
    assert job.known is not None and (job.known.etag, job.known.last_modified, job.known.fetched_at, job.known.size) \
        == (known.etag, known.last_modified, 17.5, 9)
    assert (job.settings, job.head_above, job.delay, job.limits) == (settings, 1024, 0.3, Limits())
    page = FetchedPage(req.url, "http://example.org/a", 200, {"etag": '"x2"'}, b"\x00\xffbody", "text/html", 20.0,
                       depth=3, charset="latin-1")
    back = wire.page_from_wire(json.loads(json.dumps(wire.page_to_wire(page))))
    assert back == page


@pytest.mark.parametrize("bad", [{}, {"url": "http://a/", "depth": "deep", "kind": "page", "known": None},
                                 {"url": "http://a/", "depth": 0, "kind": "page", "known": "x", "fetch": {}},
                                 {"url": "http://a/", "depth": 0, "kind": "page", "known": None, "fetch": [],
                                  "head_above": 0, "delay": 0, "limits": {}}])
def test_bad_requests_are_refused(bad: dict[str, object]):
    with pytest.raises(wire.BadMessage):
        wire.fetch_from_wire(bad)


@pytest.mark.parametrize("bad", [{}, {"url": "u", "final_url": "u", "status": 200, "headers": {}, "body": "!!",
                                      "content_type": "", "fetched_at": 0, "depth": 0}, []])
def test_bad_pages_are_refused(bad: object):
    with pytest.raises(wire.BadMessage):
        wire.page_from_wire(bad)  # type: ignore[arg-type]
