"""The wire formats as schemas (issue 29): the daemon's socket protocol without CPython's private
_json (deskdex.protocol: its own small codec on the client side, msgspec on the daemon's), and the
messages between machines declared in deskdex.wire: a shard's questions and answers over HTTP, the
cluster's task messages and results. Every malformed message is one error naming the field and why:
HTTP 400 with the code bad_message from a real `deskdex serve` on 127.0.0.1; StoreError from the
shard client reading a real HTTP server's nonsense; BadMessage from the task decoders; a log line
from a real worker, which goes on."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from deskdex import protocol
from deskdex import wire as schemas
from deskdex.cluster import wire as cluster_wire
from deskdex.errors import BadArgs, BadMessage, BadRequest, StoreError
from deskdex.index.answers import FixedStats
from deskdex.index.remote import RemoteShard

from .test_shards import TOKEN, Served, _home, _post

# -- the socket protocol's codec ------------------------------------------------------------------------
_CHARS = ["a", "é", '"', "\\", "\n", "\x00", "\x1f", "\x7f", "\u2028", "\udcff", "\ud83d", "😀", "東", " ", "/", "\t"]


def _value(rnd: random.Random, depth: int = 0) -> Any:
    k = rnd.randrange(8 if depth < 4 else 5)
    if k == 0:
        return "".join(rnd.choice(_CHARS) for _ in range(rnd.randrange(12)))
    if k == 1:
        return rnd.randrange(-10**20, 10**20)
    if k == 2:
        return rnd.choice([0.0, -0.0, 1e16, 2.5e-7, 1.5, -3.25e300, rnd.random()])
    if k == 3:
        return rnd.choice([True, False, None])
    if k == 4:
        return rnd.randrange(-5, 5)
    if k in (5, 6):
        return [_value(rnd, depth + 1) for _ in range(rnd.randrange(4))]
    return {"".join(rnd.choice(_CHARS) for _ in range(3)): _value(rnd, depth + 1) for _ in range(rnd.randrange(4))}


def test_the_codec_writes_json_dumps_bytes_and_reads_what_json_loads_reads():
    rnd = random.Random(29)
    for _ in range(3000):
        v = _value(rnd)
        for ascii_only in (True, False):
            for spaced in (True, False):
                mine = protocol.dumps(v, ascii_only=ascii_only, spaced=spaced)
                assert mine == json.dumps(v, ensure_ascii=ascii_only, allow_nan=False,
                                          separators=(", ", ": ") if spaced else (",", ":")), v
                assert repr(protocol.loads(mine)) == repr(json.loads(mine))
        text = json.dumps(v, indent=rnd.choice([None, 1, 2]))
        assert repr(protocol.loads(text)) == repr(json.loads(text))
    # True is the key 1 again, as in json.dumps: the literal's repeat is the point.
    assert protocol.dumps({1: 2, None: 3, True: 4, 1.5: 5}) == '{"1":4,"null":3,"1.5":5}'  # noqa: F601


@pytest.mark.parametrize("text", ["", " ", "garbage", "[1,]", '{"a":1,}', "[1 2]", '{"a" 1}', "{1:2}", '"\\x"',
                                  '"\\u12"', '"\\u12g4"', '"a', "01", "-", "1.", ".5", "+1", "NaN", "Infinity",
                                  "[1] x", '"a\nb"', "tru", "--1", "1e", "[", '{"a":', "1.e5", "0x10", "1_000"])
def test_the_codec_refuses_what_is_not_json(text: str):
    with pytest.raises(ValueError):
        protocol.loads(text)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {1, 2}, object(), b"bytes", {(1,): 2}])
def test_the_codec_refuses_what_json_cannot_carry(value: Any):
    with pytest.raises((TypeError, ValueError)):
        protocol.dumps(value)


def test_a_client_loads_neither_json_nor_msgspec_nor_cpythons_private_json():
    """The fast path's client side (a request written, a reply read, results printed as JSON)
    imports nothing: before, it used CPython's private _json."""
    probe = ("import sys\nfrom deskdex import protocol\n"
             "line = protocol.request_line('search', {'query': 'caf\\u00e9 \\udcff', 'limit': 3})\n"
             "reply = protocol.dumps({'ok': True, 'result': {'total': 1, 'hits': [{'path': '/x/\\u6771', 's': 1.5}]}})\n"
             "assert protocol.parse_reply(reply.encode())['hits'][0]['path'] == '/x/\\u6771'\n"
             "protocol.dumps({'a': [1, None]}, ascii_only=False, spaced=True)\n"
             "print(sorted(m for m in ('_json', 'json', 'msgspec', 're', 'typing') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("line, error, says", [
    (b"null", BadRequest, "JSON object"), (b"[]", BadRequest, "JSON object"), (b"garbage", BadRequest, "not JSON"),
    (b'{"op":"search","query":"x"} junk', BadRequest, "not JSON"),
    (b'{"op":"search","query":"x","limit":1e999}', BadArgs, "limit"),
    (b'{"op":"search","query":"x","limit":"5"}', BadArgs, "limit"),
    (b'{"op":"search"}', BadArgs, "missing argument 'query'"),
    (b'{"op":"search","query":"x","junk":1}', BadArgs, "junk"),
    (b"[" * 100_000, BadRequest, "nested"),
])
def test_a_malformed_request_is_one_protocol_error(line: bytes, error: type[Exception], says: str):
    with pytest.raises(error, match=".*") as caught:
        protocol.parse_request(line)
    assert type(caught.value) is error and says in str(caught.value), caught.value


def test_a_request_with_a_file_name_that_is_not_utf8_still_reads():
    """msgspec refuses the escape of an unpaired surrogate; JSON allows it, and a file name that is
    not UTF-8 needs it (os.fsdecode): read as json.loads reads it."""
    name = b"/tmp/caf\xe9".decode("utf-8", "surrogateescape")
    op, args = protocol.parse_request(protocol.request_line("index", {"paths": [name]}))
    assert op.name == "index" and args["paths"] == [name]
    reply = protocol.result_reply({"path": name, "score": 2.5})
    assert protocol.parse_reply(reply) == {"path": name, "score": 2.5}


def test_a_long_reply_is_read_like_a_short_one():
    hits = [{"path": f"/docs/r\u00e9port {i}.pdf", "score": i / 7, "highlights": [[1, 2]]} for i in range(2000)]
    line = protocol.result_reply({"total": 2000, "hits": hits})
    assert len(line) > protocol._BIG_REPLY
    assert protocol.parse_reply(line) == {"total": 2000, "hits": hits}


# -- a shard's questions, to a real `deskdex serve` ------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("served")
    docs = tmp / "docs"
    docs.mkdir()
    (docs / "harbour.txt").write_text("the harbour fleet sails at dawn\n")
    shard = _home(tmp, "shard", f'token = "{TOKEN}"\n')
    shard.run("index", str(docs))
    s = Served(shard)
    yield s
    s.stop()


STATS = {"num_docs": 1, "terms": [["body", "fleet"]], "freqs": [1]}
GOOD = {"stats": {"terms": [["body", "fleet"]]},
        "search": {"query": "fleet", "need": 5, "sort": "relevance", "collapse": True, "stats": STATS},
        "snippets": {"query": "fleet", "uris": ["file:///nowhere"]}}


def _malformed(what: str) -> list[tuple[bytes, str]]:
    """Bodies that are not a ``what`` question, each with what the refusal must name."""
    good = GOOD[what]
    first = next(iter(good))
    out = [(b"null", "got `null`"), (b"[]", "got `array`"), (b"garbage", "not JSON"), (b"", "not JSON"),
           (json.dumps(good).encode() + b" junk", "not JSON"),
           (json.dumps({**good, "junk": 1}).encode(), "unknown field `junk`"),
           (json.dumps({k: v for k, v in good.items() if k != first}).encode(), f"missing required field `{first}`"),
           (json.dumps({**good, first: 5}).encode(), f"`$.{first}`")]
    if what == "search":
        out += [(json.dumps({**good, "need": 0}).encode(), "`$.need`"),
                (json.dumps({**good, "need": protocol.MAX_LIMIT + 1}).encode(), "`$.need`"),
                (json.dumps({**good, "sort": "random"}).encode(), "`$.sort`"),
                (json.dumps({**good, "collapse": "yes"}).encode(), "`$.collapse`"),
                (json.dumps({**good, "query": "x" * (protocol.MAX_QUERY + 1)}).encode(), "`$.query`"),
                (json.dumps({**good, "stats": {**STATS, "freqs": [1, 2]}}).encode(), "one count a word"),
                (json.dumps({**good, "stats": {**STATS, "freqs": [-1]}}).encode(), "`$.stats.freqs[0]`")]
    if what == "snippets":
        out += [(json.dumps({**good, "uris": [1]}).encode(), "`$.uris[0]`"),
                (json.dumps({**good, "uris": ["u"] * (protocol.MAX_LIMIT + 1)}).encode(), "`$.uris`")]
    if what == "stats":
        out += [(json.dumps({"terms": [["body"]]}).encode(), "`$.terms[0]`")]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("what", ["stats", "search", "snippets"])
def test_a_malformed_question_is_a_400_naming_the_field(served: Served, what: str):
    status, answer = _post(f"{served.url}/{what}", json.dumps(GOOD[what]).encode(), TOKEN)
    assert status == 200, answer
    for body, says in _malformed(what):
        status, answer = _post(f"{served.url}/{what}", body, TOKEN)
        assert status == 400 and answer["code"] == "bad_message", (body[:200], status, answer)
        message = str(answer["message"])
        assert f"/{what}" in message and says in message, (body[:200], message)
    assert served.proc.poll() is None
    log = served.log.read_text()
    assert "Traceback" not in log and "refused POST" in log


@pytest.mark.slow
def test_a_question_too_large_is_refused_before_it_is_read(served: Served):
    from deskdex.daemon.shardserver import MAX_BODY

    status, answer = _post(f"{served.url}/stats", b"", TOKEN, length=MAX_BODY + 1)
    assert status == 413 and answer["code"] == "too_large", answer


# -- a shard's answers, from a real HTTP server that answers nonsense ---------------------------------
class _Nonsense:
    """An HTTP server on 127.0.0.1 that answers every question with the status and body set last,
    counting the connections it was asked on."""

    def __init__(self) -> None:
        self.status, self.body, self.ports = 200, b"{}", set[int]()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 10  # a keep-alive connection the client never closes ends, so close() cannot hang

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                owner.ports.add(self.client_address[1])
                self.send_response(owner.status)
                self.send_header("Content-Length", str(len(owner.body)))
                self.end_headers()
                self.wfile.write(owner.body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = False  # server_close joins the request threads: none outlives the test
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.thread.join(10)


@pytest.fixture
def nonsense() -> Iterator[_Nonsense]:
    n = _Nonsense()
    yield n
    n.close()


HIT = {"uri": "file:///a", "path": "/a", "title": "A", "snippet": "", "score": 1.0, "mime": "text/plain",
       "mtime": 1, "size": 2, "ext": "txt", "source": "files", "cluster": 0, "highlights": None, "duplicates": 0,
       "similar": 0, "lang": "en"}
SEARCH = {"total": 1, "hits": [HIT], "trees": [], "keys": [None], "num_docs": 1}


@pytest.mark.parametrize("what, body, says", [
    ("stats", b"null", "got `null`"), ("stats", b"[]", "got `array`"), ("stats", b"garbage", "not JSON"),
    ("stats", b'{"num_docs": 1, "terms": [], "freqs": []} junk', "not JSON"),
    ("stats", b'{"num_docs": "1", "terms": [], "freqs": []}', "`$.num_docs`"),
    ("stats", b'{"terms": [], "freqs": []}', "missing required field `num_docs`"),
    ("stats", b'{"num_docs": 1, "terms": [["body", "x"]], "freqs": []}', "one count a word"),
    ("search", json.dumps({**SEARCH, "hits": [{**HIT, "uri": 5}]}).encode(), "`$.hits[0].uri`"),
    ("search", json.dumps({**SEARCH, "hits": [{k: v for k, v in HIT.items() if k != "lang"}]}).encode(),
     "missing required field `lang` - at `$.hits[0]`"),
    ("search", json.dumps({**SEARCH, "keys": []}).encode(), "one key a hit"),
    ("search", json.dumps({**SEARCH, "keys": [["sum", "text/plain", None, "file:///a", "big", []]]}).encode(),
     "`$.keys[0][4]`"),
    ("snippets", b'{"snippets": {"file:///a": ["s", [[1, "2"]]]}}', "`$.snippets[...][1][0][1]`"),
    ("snippets", b'{"snippets": []}', "`$.snippets`"),
])
def test_a_shards_nonsense_fails_the_search_naming_the_field(nonsense: _Nonsense, what: str, body: bytes, says: str):
    nonsense.body = body
    shard = RemoteShard(nonsense.url, TOKEN)
    try:
        with pytest.raises(StoreError) as caught:
            if what == "stats":
                shard.stats([("body", "x")])
            elif what == "search":
                shard.search("x", 5, "relevance", True, FixedStats(1, {}))
            else:
                shard.snippets("x", [dict(HIT)])  # type: ignore[list-item]
        message = str(caught.value)
        assert nonsense.url in message and f"/{what}" in message and says in message, message
    finally:
        shard.close()


def test_a_shards_refusal_is_named_and_its_connection_kept(nonsense: _Nonsense):
    shard = RemoteShard(nonsense.url, TOKEN)
    try:
        nonsense.body = b'{"num_docs": 3, "terms": [["body", "x"]], "freqs": [2]}'
        assert shard.stats([("body", "x")]).doc_freq("body", "x") == 2
        nonsense.status, nonsense.body = 400, b'{"code": "bad_message", "message": "a question that is not deskdex\'s"}'
        with pytest.raises(StoreError, match="answered 400: a question that is not deskdex's"):
            shard.stats([("body", "x")])
        nonsense.status, nonsense.body = 500, b"garbage"
        with pytest.raises(StoreError, match="answered 500: Internal Server Error"):
            shard.stats([("body", "x")])
        assert len(nonsense.ports) == 1, nonsense.ports  # one kept connection for the three questions
    finally:
        shard.close()


# -- the cluster's messages -------------------------------------------------------------------------
SOURCE = {"uri": "file:///docs/a.txt", "name": "a.txt", "path": "/docs/a.txt", "mime": None, "depth": 0, "data": None}
OUTCOME = {"uri": "file:///docs/a.txt", "reason": "corrupt", "message": "bad bytes", "document": None}
PAGE = {"url": "http://a.example/", "final_url": "http://a.example/", "status": 200, "headers": {"etag": "x"},
        "body": "aGk=", "content_type": "text/html", "fetched_at": 1.0, "depth": 0, "charset": None}
FETCH = {"url": "http://a.example/", "depth": 0, "kind": "page", "known": None,
         "fetch": {"user_agent": "ua", "timeout": 1.0, "deadline": 2.0, "max_bytes": 10, "max_redirects": 1,
                   "allow_private": False, "dns_ttl": 3.0}, "head_above": 0, "delay": 0.5, "limits": {}}


def _kinds(good: dict[str, Any], field: str, wrong: Any) -> list[tuple[Any, str]]:
    """Every kind of malformed message, made from ``good``: ``field`` missing, ``wrong`` in it..."""
    return [(None, "got `null`"), ([], "got `array`"), ("garbage", "got `str`"), ({}, "missing required field"),
            ({k: v for k, v in good.items() if k != field}, f"missing required field `{field}`"),
            ({**good, field: wrong}, f"`$.{field}`"), ({**good, "junk": 1}, "unknown field `junk`")]


@pytest.mark.parametrize("decode, good, field, wrong, what", [
    (cluster_wire.source_from_wire, SOURCE, "name", 5, "not a file to convert"),
    (cluster_wire.fetch_from_wire, FETCH, "depth", -1, "not a request to fetch"),
])
def test_a_malformed_task_is_one_bad_message_naming_the_field(decode: Any, good: dict[str, Any], field: str, wrong: Any,
                                                              what: str):
    decode(good)
    for msg, says in _kinds(good, field, wrong):
        with pytest.raises(BadMessage) as caught:
            decode(msg)
        assert what in str(caught.value) and says in str(caught.value), (msg, caught.value)


@pytest.mark.parametrize("decode, good, field, wrong, what", [
    (cluster_wire.page_from_wire, PAGE, "status", "200", "not a fetched page"),
])
def test_a_malformed_result_is_one_bad_message_naming_the_field(decode: Any, good: dict[str, Any], field: str,
                                                                wrong: Any, what: str):
    decode(good)
    for msg, says in _kinds(good, field, wrong)[:-1]:  # a result may carry a newer worker's fields
        with pytest.raises(BadMessage) as caught:
            decode(msg)
        assert what in str(caught.value) and says in str(caught.value), (msg, caught.value)


@pytest.mark.parametrize("msg, says", [
    (None, "got `null`"), ({}, "got `object`"), ("garbage", "got `str`"), ([], "no outcome at all"),
    ([{**OUTCOME, "uri": None}], "`$[0].uri`"), ([{k: v for k, v in OUTCOME.items() if k != "uri"}], "`uri`"),
    ([OUTCOME, {**OUTCOME, "document": "<doc><open></doc>"}], "`$[1].document`"),
    ([{**OUTCOME, "features": {"group": None, "fp": 1, "fps": "!!"}}], "`$[0].features.fps`"),
    ([{**OUTCOME, "features": {"group": 5, "fp": 1, "fps": ""}}], "`$[0].features.group`"),
])
def test_a_malformed_outcome_is_one_bad_message_naming_the_field(msg: Any, says: str):
    with pytest.raises(BadMessage) as caught:
        cluster_wire.outcomes_from_wire(msg)
    assert "not a conversion's outcome" in str(caught.value) and says in str(caught.value), caught.value


@pytest.mark.parametrize("msg, says", [
    (None, "got `null`"), ([], "got `array`"), ("garbage", "got `str`"),
    ({"time_seconds": "1"}, "`$.time_seconds`"), ({"depth": -1}, "`$.depth`"),
    ({"time_seconds": float("nan")}, "`$.time_seconds`"), ({"junk": 1}, "unknown field `junk`"),
    ({"ocr": {"junk": 1}}, "unknown field `junk` - at `$.ocr`"), ({"ocr": {"enabled": "yes"}}, "`$.ocr.enabled`"),
])
def test_malformed_limits_are_one_bad_message_naming_the_field(msg: Any, says: str):
    with pytest.raises(BadMessage) as caught:
        cluster_wire.limits_from_wire(msg)
    assert "not conversion limits" in str(caught.value) and says in str(caught.value), caught.value


# -- the envelopes: a task's arguments, a worker's result -----------------------------------------------
REPLY = "deskdex:reply:abc"


@pytest.mark.parametrize("kind, good, what", [
    (schemas.ConvertArgs, [[SOURCE], {}, REPLY], "not a task to convert"),
    (schemas.FetchArgs, [FETCH, REPLY], "not a task to fetch"),
])
def test_a_malformed_task_envelope_is_one_bad_message_naming_the_argument(kind: Any, good: list[Any], what: str):
    names = kind.__struct_fields__
    schemas.arguments(tuple(good), {}, kind, what)
    schemas.arguments((), dict(zip(names, good)), kind, what)  # by name, as Celery allows
    kinds: list[tuple[tuple[Any, ...], dict[str, Any], str]] = [
        ((), {}, f"missing required field `{names[0]}`"),
        (tuple(good[:-1]), {}, "missing required field `reply`"),
        ((*good, "more"), {}, f"{len(good) + 1} arguments, not {len(good)}"),
        (tuple(good), {"evil": 1}, "unknown field `evil`"),
        (tuple(good[:1]), {names[0]: good[0]}, f"given twice - at `$.{names[0]}`"),
        ((*good[:-1], 5), {}, "Expected `str`, got `int` - at `$.reply`"),
        ((*good[:-1], QUEUE_NAME), {}, "matching regex '^deskdex:reply:' - at `$.reply`"),
        ((*good[:-1], ["not", "a", "key"]), {}, "got `array` - at `$.reply`"),
    ]
    for i, name in enumerate(names):
        for wrong, says in ((None, "got `null`"), ([], "got `array`"), ("garbage", "")):
            if (wrong, name) != ([], "sources"):  # no file at all is a task of nothing to do
                kinds.append(((*good[:i], wrong, *good[i + 1:]), {}, f"{says} - at `$.{name}`"))
    first = names[0]
    if kind is schemas.ConvertArgs:
        kinds += [(([None], {}, REPLY), {}, "got `null` - at `$.sources[0]`"),
                  (([[]], {}, REPLY), {}, "got `array` - at `$.sources[0]`"),
                  (([{**SOURCE, "name": 5}], {}, REPLY), {}, "got `int` - at `$.sources[0].name`"),
                  (([{**SOURCE, "junk": 1}], {}, REPLY), {}, "unknown field `junk` - at `$.sources[0]`")]
    else:
        kinds += [(({**FETCH, "depth": -1}, REPLY), {}, f"- at `$.{first}.depth`"),
                  (({**FETCH, "junk": 1}, REPLY), {}, f"unknown field `junk` - at `$.{first}`")]
    for args, kwargs, says in kinds:
        with pytest.raises(BadMessage) as caught:
            schemas.arguments(args, kwargs, kind, what)
        assert str(caught.value).startswith(what + ": ") and says in str(caught.value), (args, kwargs, caught.value)


QUEUE_NAME = "deskdex.convert"  # a reply pushed there would be read as a task


@pytest.mark.parametrize("kind, good, field, wrong", [
    (schemas.ConvertResult, {"id": "t:0", "outcomes": [OUTCOME]}, "outcomes", {"uri": "x"}),
    (schemas.ConvertResult, {"id": "t:0", "outcomes": [OUTCOME]}, "id", 5),
    (schemas.FetchResult, {"id": "t", "page": PAGE, "outcomes": [OUTCOME]}, "page", []),
    (schemas.FetchResult, {"id": "t", "error": {"reason": "timeout", "message": "m", "retry_after": None}},
     "error", "slow"),
])
def test_a_malformed_result_envelope_is_one_bad_message_naming_the_field(kind: Any, good: dict[str, Any], field: str,
                                                                         wrong: Any):
    what = "not a worker's result"
    assert schemas.decode(json.dumps(good).encode(), kind, what).id == good["id"]
    # A newer worker's field is ignored, not refused: results are answers.
    assert schemas.decode(json.dumps({**good, "junk": 1}).encode(), kind, what).id == good["id"]
    for msg, says in [*_kinds(good, field, wrong)[:-1], ({**good, field: None}, f"`$.{field}`")]:
        if kind is schemas.FetchResult and isinstance(msg, dict) and msg.get("id") and msg.get(field) is None:
            says = "`page` or `error`, one of them, not neither"
        with pytest.raises(BadMessage) as caught:
            schemas.decode(json.dumps(msg).encode(), kind, what)
        assert str(caught.value).startswith(what + ": ") and says in str(caught.value), (msg, caught.value)
    for text in (b"garbage", b"", b'{"id": "t"'):
        with pytest.raises(BadMessage, match="not a worker's result: not JSON"):
            schemas.decode(text, kind, what)


def test_results_are_written_as_their_schema_reads_them(tmp_path: Path):
    from deskdex.converters import Outcome

    outcome = Outcome("file:///docs/\udcff.txt", reason="corrupt", message="bad bytes")  # not UTF-8: json's path
    for result in (schemas.ConvertResult("t:0", cluster_wire.outcome_messages([outcome])),
                   schemas.FetchResult("t", error=schemas.FetchFailure("timeout", "slow", 2.5))):
        back = schemas.decode(schemas.encode(result), type(result), "not a worker's result")
        assert back == result
    with pytest.raises(BadMessage, match="`page` or `error`, one of them, not both"):
        schemas.decode(json.dumps({"id": "t", "page": PAGE, "error": {"reason": "r", "message": "m"}}).encode(),
                       schemas.FetchResult, "not a worker's result")


# -- a real worker ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_worker_logs_a_malformed_task_by_its_field_and_goes_on(tmp_path: Path, broker: str, workers: list[Any]):
    from .test_cluster import Worker
    from .test_cluster_trust import QUEUE, Resp, envelope, file_source, replies

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text("A good file about lighthouses and herons.")
    worker = Worker(tmp_path, "w1", broker)
    workers.append(worker)
    r = Resp(broker)
    some = file_source(docs / "good.txt")
    reply = "deskdex:reply:good"
    for task, args, kwargs in (("deskdex.convert", [[{**some, "name": 5}], {}, reply], None),
                               ("deskdex.convert", [[some], {"depth": "deep"}, reply], None),
                               ("deskdex.convert", [[{**some, "junk": 1}], {}, reply], None),
                               ("deskdex.convert", [None, {}, reply], None),
                               ("deskdex.convert", [[some], [], reply], None),
                               ("deskdex.convert", [[some], {}], None),
                               ("deskdex.convert", [[some], {}, reply, "more"], None),
                               ("deskdex.convert", [[some], {}, reply], {"evil": 1}),
                               ("deskdex.convert", [[some], {}, "deskdex.convert"], None),
                               ("deskdex.fetch", [{**FETCH, "depth": "0"}, reply], None),
                               ("deskdex.fetch", [FETCH, None], None)):
        r("LPUSH", QUEUE if task == "deskdex.convert" else "deskdex.crawl.0",
          envelope(task, args, kwargs, queue=QUEUE if task == "deskdex.convert" else "deskdex.crawl.0"))
    r("LPUSH", QUEUE, envelope("deskdex.convert", [[some], {}, reply]))
    [result] = replies(r, reply, 1)
    assert "lighthouses" in result["outcomes"][0]["document"]
    assert worker.proc.poll() is None
    log = worker.log.read_text()
    for says in ("not a task to convert: Expected `str`, got `int` - at `$.sources[0].name`",
                 "not conversion limits: Expected `int`, got `str` - at `$.depth`",
                 "not a task to convert: Object contains unknown field `junk` - at `$.sources[0]`",
                 "not a task to convert: Expected `array`, got `null` - at `$.sources`",
                 "not a task to convert: Expected `object`, got `array` - at `$.limits`",
                 "not a task to convert: Object missing required field `reply`",
                 "not a task to convert: 4 arguments, not 3 (sources, limits, reply) - at `$[3]`",
                 "not a task to convert: Object contains unknown field `evil`",
                 "not a task to convert: Expected `str` matching regex '^deskdex:reply:' - at `$.reply`",
                 "not a task to fetch: Expected `int`, got `str` - at `$.request.depth`",
                 "not a task to fetch: Expected `str`, got `null` - at `$.reply`"):
        assert says in log, (says, log[-3000:])
    assert r("LLEN", "deskdex.crawl.0") == 0  # the fetch tasks were taken, and dropped
    r.close()


# The coordinator's side, in a process of its own: pytest's path hides kombu (tests/test_cluster_trust.py's Resp).
_COORDINATOR = r"""
import base64, json, logging, sys, threading, time
import redis
from deskdex.cluster.pool import RemotePool
from deskdex.converters import Limits, Source

logging.basicConfig(level=logging.ERROR, stream=sys.stdout, format="LOG %(message)s")
broker, bad = sys.argv[1], json.loads(sys.argv[2])
pool = RemotePool(broker, Limits(), 1.0)
r = redis.Redis.from_url(broker)
stop = threading.Event()

def answer():
    # As a worker would: the task's id and reply list from the queued message, the results pushed there.
    deadline = time.monotonic() + 60
    while not (raw := r.lindex("deskdex.convert", 0)):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    task = json.loads(raw)
    tid, reply = task["headers"]["id"], json.loads(base64.b64decode(task["body"]))[0][2]
    for text in bad:
        r.rpush(reply, text.replace("TID", tid))
    r.rpush(reply, json.dumps({"id": tid + ":1", "outcomes": [{"uri": "mem:b", "reason": "corrupt", "message": "ok",
                                                                "document": None}], "newer": 1}))

threading.Thread(target=answer, daemon=True).start()
for source, outcomes in pool.map([Source(uri="mem:a", name="a.txt", data=b"a"),
                                  Source(uri="mem:b", name="b.txt", data=b"b")], stop):
    print("GOT", source.uri, outcomes[0].reason, outcomes[0].message, flush=True)
pool.close()
"""


@pytest.mark.slow
def test_a_coordinator_drops_a_malformed_result_naming_the_field_and_goes_on(tmp_path: Path, broker: str):
    # Each malformed result is logged: one without an id (or of another type) is nobody's and dropped;
    # one for file 0 fails that file by name (it is no longer waited for, and must not vanish). File 1's
    # result, with a newer worker's field, is read.
    bad = ["garbage", "null", "[]", "{}", '{"id": 5}', '{"id": "TID:0", "outcomes": "none"}']
    done = subprocess.run([sys.executable, "-c", _COORDINATOR, broker, json.dumps(bad)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    out = done.stdout
    assert done.returncode == 0, done.stderr[-3000:]
    assert out.count("GOT ") == 2 and "GOT mem:b corrupt ok" in out, out
    unread = "not a worker's result: Expected `array`, got `str` - at `$.outcomes`"
    assert f"GOT mem:a crash the worker's result could not be read: {unread}" in out, out
    assert f"LOG a worker's result for mem:a could not be read: {unread}" in out, out
    for says in ("not a worker's result: not JSON", "not a worker's result: Expected `object`, got `null`",
                 "not a worker's result: Expected `object`, got `array`",
                 "not a worker's result: Object missing required field `id`",
                 "not a worker's result: Expected `str`, got `int` - at `$.id`"):
        assert f"LOG dropped a reply that is not a worker's: {says}" in out, (says, out)


_CRAWL_COORDINATOR = r"""
import asyncio, base64, json, sys, threading, time
import redis
from deskdex.cluster.crawling import RemoteCrawl
from deskdex.converters import Limits
from deskdex.errors import FetchError
from deskdex.webcrawl import CrawlSettings, Crawler, Request

broker, bad = sys.argv[1], json.loads(sys.argv[2])
remote = RemoteCrawl(broker, 1.0, Limits())
crawler = Crawler(CrawlSettings(seeds=["http://a.example/"], delay=0.0), None, remote=remote)
r = redis.Redis.from_url(broker)

def answer():
    # As a worker would: each request's task id and reply list from the crawl queues, its result pushed there.
    for text in bad:
        deadline = time.monotonic() + 60
        while not (item := r.blpop([f"deskdex.crawl.{k}" for k in range(64)], timeout=1)):
            assert time.monotonic() < deadline
        task = json.loads(item[1])
        tid, reply = task["headers"]["id"], json.loads(base64.b64decode(task["body"]))[0][1]
        r.rpush(reply, text.replace("TID", tid))

async def main():
    for _ in bad:
        try:
            page = await crawler.fetcher(Request("http://a.example/", 0), None)
            print("PAGE", page.status, flush=True)
        except FetchError as exc:
            print("FAILED", exc.reason, exc, flush=True)

threading.Thread(target=answer, daemon=True).start()
asyncio.run(main())
remote.close()
"""


@pytest.mark.slow
def test_a_crawls_request_with_a_malformed_result_fails_naming_the_field(tmp_path: Path, broker: str):
    # The result of a request that does not fit its schema fails that request (bad_answer), which
    # the crawl records and goes on from; a failure's reason of another type is no failure's reason.
    page = json.dumps({"id": "TID", "page": PAGE, "newer": 1})
    bad = ['{"id": "TID", "page": ' + json.dumps({**PAGE, "status": "200"}) + "}",
           '{"id": "TID", "error": {"reason": 5, "message": "m"}}', '{"id": "TID"}',
           '{"id": "TID", "page": ' + json.dumps(PAGE) + ', "outcomes": [null]}', page]
    done = subprocess.run([sys.executable, "-c", _CRAWL_COORDINATOR, broker, json.dumps(bad)], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    says = ["Expected `int`, got `str` - at `$.page.status`", "Expected `str`, got `int` - at `$.error.reason`",
            "`page` or `error`, one of them, not neither", "got `null` - at `$.outcomes[0]`"]
    assert len(lines) == len(bad), done.stdout + done.stderr[-3000:]
    for line, why in zip(lines, says):
        assert line.startswith("FAILED bad_answer a worker's answer that is not deskdex's: not a worker's result: ") \
            and why in line, (line, why)
    assert lines[-1] == "PAGE 200"  # a newer worker's field is ignored


from .test_cluster import broker, redis_server, workers  # noqa: E402, F401  (fixtures)
