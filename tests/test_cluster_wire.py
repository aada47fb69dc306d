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
