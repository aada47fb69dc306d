"""What crosses between machines besides the daemon's socket (deskdex.protocol), declared once as
msgspec schemas and read in one pass:

    the questions of a merged search over HTTP and their answers
        POST /stats      StatsQuestion      -> WordStats
        POST /search     SearchQuestion     -> SearchAnswer
        POST /snippets   SnippetsQuestion   -> SnippetsAnswer
        a refusal (4xx, 5xx)                -> ErrorAnswer {code, message[, position]}
      daemon/shardserver.py answers them, index/remote.py asks them;
    the cluster's messages through the broker
        task deskdex.convert   ConvertArgs [SourceMessage], limits, reply   -> ConvertResult {id, outcomes}
        task deskdex.fetch     FetchArgs FetchMessage, reply               -> FetchResult {id, page | error, outcomes}
      cluster/wire.py turns them into the objects they stand for (Source, Limits, Outcome, FetchedPage).

Every message that does not fit its schema (not JSON, ``null``, ``[]``, ``garbage``, a field
missing, of another type or out of range, a field the schema does not have, a question too large)
is one BadMessage (code ``bad_message``) naming the message, the field (``$.stats.freqs[2]``) and
why. The shard server answers it with HTTP 400 and that code; a worker logs it and drops the task.

Questions refuse fields they do not know; answers and results ignore them, so that a newer shard or
worker can add one. Imports msgspec, which costs 50 ms: never on the ``deskdex`` command's fast path.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, NotRequired, TypedDict, TypeVar, get_args

import msgspec

from .errors import BadMessage
from .protocol import MAX_LIMIT, MAX_QUERY, SORTS

T = TypeVar("T")

Query = Annotated[str, msgspec.Meta(max_length=MAX_QUERY)]
Count = Annotated[int, msgspec.Meta(ge=0)]
Term = tuple[str, str]  # (field, word)
Sort = Literal["relevance", "date", "size"]
assert set(get_args(Sort)) == set(SORTS), "the shard's sorts are the protocol's"


class Question(msgspec.Struct, forbid_unknown_fields=True):
    """A question to a shard: a field it does not know is refused, not ignored."""


class Answer(msgspec.Struct):
    """What a shard or a worker sends back: fields of a newer version are ignored."""


# -- a merged search over HTTP -----------------------------------------------------------------------
class WordStats(Question):
    """A shard's document count and the document frequency of each word asked (index/answers.py's
    FixedStats): the answer to /stats, and the pooled statistics of a /search question."""

    num_docs: Count
    terms: list[Term]
    freqs: list[Count]

    def __post_init__(self) -> None:
        if len(self.terms) != len(self.freqs):
            raise ValueError(f"{len(self.terms)} terms but {len(self.freqs)} freqs: one count a word")


class StatsQuestion(Question):
    terms: list[Term]


class SearchQuestion(Question):
    query: Query
    need: Annotated[int, msgspec.Meta(ge=1, le=MAX_LIMIT)]
    sort: Sort
    collapse: bool
    stats: WordStats


class SnippetsQuestion(Question):
    query: Query
    uris: Annotated[list[str], msgspec.Meta(max_length=MAX_LIMIT)]


QUESTIONS: dict[str, type[Question]] = {"stats": StatsQuestion, "search": SearchQuestion,
                                        "snippets": SnippetsQuestion}


class Hit(TypedDict):
    """A hit of a shard's /search answer: deskdex.protocol's SearchHit, without its snippet yet."""

    uri: str
    path: str
    title: str
    snippet: str
    score: float
    mime: str
    mtime: int
    size: int
    ext: str
    source: str
    cluster: int
    highlights: list[list[int]] | None
    duplicates: int
    similar: int
    lang: str | None
    page: NotRequired[int | None]  # of a snippet, which /search does not make (a shard before pages: none)
    related: NotRequired[bool]  # false: a shard's /search is by the words alone (a shard before meaning: none)


# index/readable.py's CopyKey.to_json: text_sum, mime, lang, uri, size, fingerprints.
CopyKeyMessage = tuple[str | None, str, str | None, str, int, list[int]]


class SearchAnswer(Answer):
    total: Count
    hits: list[Hit]
    trees: list[dict[str, Any] | None]  # tantivy's explanation of each hit's score; [] unless by relevance
    keys: list[CopyKeyMessage | None]
    num_docs: Count

    def __post_init__(self) -> None:
        if len(self.keys) != len(self.hits) or self.trees and len(self.trees) != len(self.hits):
            raise ValueError("not one explanation and one key a hit")


Highlights = list[tuple[int, int]]


class SnippetsAnswer(Answer):
    snippets: dict[str, tuple[str | None, Highlights | None]]  # by URI: the snippet and its highlights
    # By URI: the page of a paged document's snippet. Apart from ``snippets``, whose pairs a shard
    # from before pages sends and reads: from one of those, none (a newer field is ignored).
    pages: dict[str, int | None] = {}


class ErrorAnswer(Answer, omit_defaults=True):
    """A shard's refusal; ``code`` one of deskdex.errors' (bad_message, bad_query, forbidden...)."""

    code: str = ""
    message: str = ""
    position: int | None = None  # a bad_query's


# -- the cluster's messages through the broker -----------------------------------------------------
class SourceMessage(Question):
    """converters/source.py's Source: a file by its path (read by the worker) or its bytes."""

    uri: str
    name: str
    path: str | None = None
    mime: str | None = None
    depth: Count = 0
    data: bytes | None = None  # base64 in JSON


class KnownMessage(Question):
    etag: str | None = None
    last_modified: str | None = None
    fetched_at: float = 0.0
    size: Count = 0


class FetchSettingsMessage(Question):
    """webcrawl/fetch.py's FetchSettings."""

    user_agent: str
    timeout: Annotated[float, msgspec.Meta(ge=0)]
    deadline: Annotated[float, msgspec.Meta(ge=0)]
    max_bytes: Count
    max_redirects: Count
    allow_private: bool
    dns_ttl: Annotated[float, msgspec.Meta(ge=0)]


class FetchMessage(Question):
    """One request of a crawl: the URL, what is known of it, how to fetch it and convert its page."""

    url: str
    depth: Count
    kind: str
    known: KnownMessage | None
    fetch: FetchSettingsMessage
    head_above: Count
    delay: Annotated[float, msgspec.Meta(ge=0)]
    limits: dict[str, Any]


class FeaturesMessage(Answer):
    """index/features.py's Features of a converted text."""

    group: str | None
    fp: int | None
    fps: bytes  # index/fingerprints.py's blob, base64 in JSON


class OutcomeMessage(Answer):
    """converters/convert.py's Outcome: a document as tagged text, or why there is none."""

    uri: str
    reason: str = ""
    message: str = ""
    document: str | None = None
    features: FeaturesMessage | None = None


class PageMessage(Answer):
    """webcrawl/sink.py's FetchedPage."""

    url: str
    final_url: str
    status: int
    headers: dict[str, str]
    body: bytes  # base64 in JSON
    content_type: str
    fetched_at: float
    depth: Count
    charset: str | None = None


# -- the envelopes: a task's arguments, a worker's result ------------------------------------------------
REPLY_PREFIX = "deskdex:reply:"  # the lists coordinators wait on: a task names one, and no other key
Reply = Annotated[str, msgspec.Meta(pattern=f"^{REPLY_PREFIX}")]


class ConvertArgs(Question):
    """The arguments of a task deskdex.convert: the files, the coordinator's limits (checked by
    cluster/wire.py's limits_from_wire, which refuses a limit that is not a number of 0 or more) and
    the list to push each file's result to."""

    sources: list[SourceMessage]
    limits: dict[str, Any]
    reply: Reply


class FetchArgs(Question):
    """The arguments of a task deskdex.fetch: one request and the list to push its result to."""

    request: FetchMessage
    reply: Reply


class ResultId(Answer):
    """A result's id, read before the rest: a coordinator knows by it which file or request it is for."""

    id: str


class ConvertResult(ResultId):
    """What became of one file of a task deskdex.convert; ``id`` is ``<task id>:<file's index>``."""

    outcomes: list[OutcomeMessage]


class FetchFailure(Answer):
    """webcrawl/fetch.py's FetchError: why a request gave no page."""

    reason: str
    message: str
    retry_after: float | None = None


class FetchResult(ResultId, omit_defaults=True):
    """What a task deskdex.fetch gave: its page (and the page's outcomes, when it is converted) or why none."""

    page: PageMessage | None = None
    error: FetchFailure | None = None
    outcomes: list[OutcomeMessage] | None = None

    def __post_init__(self) -> None:
        if (self.page is None) == (self.error is None):
            raise ValueError(f"`page` or `error`, one of them, not {'neither' if self.page is None else 'both'}")


def arguments(args: tuple[Any, ...], kwargs: dict[str, Any], kind: type[T], what: str) -> T:
    """A Celery task's arguments (positional, as coordinators send them, or by name) as a ``kind``
    (a Struct whose fields are the arguments in order), or BadMessage naming ``what``, the argument
    and why: one missing, of another type, unknown, or one too many."""
    # getattr: T is bound to Struct, whose stubs leave __struct_fields__ to each subclass.
    names: tuple[str, ...] = getattr(kind, "__struct_fields__")  # noqa: B009
    if len(args) > len(names):
        raise BadMessage(f"{what}: {len(args)} arguments, not {len(names)} ({', '.join(names)}) - at `$[{len(names)}]`")
    given = dict(zip(names, args))
    twice = sorted(given.keys() & kwargs.keys())
    if twice:
        raise BadMessage(f"{what}: argument given twice - at `$.{twice[0]}`")
    return convert({**given, **kwargs}, kind, what)


# -- reading and writing -----------------------------------------------------------------------------
def decode(data: bytes | str, kind: type[T], what: str) -> T:
    """``data`` (JSON) as a ``kind``, or BadMessage naming ``what``, the field and why.

    msgspec refuses the escape of an unpaired surrogate (``"\\udcff"``), which JSON allows and a
    file name that is not UTF-8 needs (os.fsdecode's surrogateescape): JSON that msgspec refuses is
    read again by the json package, and what it takes is checked against the schema all the same."""
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        raise BadMessage(f"{what}: {exc}") from None
    except msgspec.DecodeError as exc:
        refused = exc
    except RecursionError:
        raise BadMessage(f"{what}: nested too deep") from None
    try:
        value = json.loads(data, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise BadMessage(f"{what}: not JSON: {refused}") from None
    return convert(value, kind, what)


def convert(value: Any, kind: type[T], what: str) -> T:
    """``value`` (what JSON decodes to: dicts, lists, str...) as a ``kind``, or BadMessage naming
    ``what``, the field and why."""
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise BadMessage(f"{what}: {exc}") from None
    except RecursionError:
        raise BadMessage(f"{what}: nested too deep") from None


def encode(value: Any) -> bytes:
    """JSON of ``value`` (structs, dicts, lists...). A string with an unpaired surrogate (a file name
    that is not UTF-8) is not UTF-8 for msgspec: such a message is written by the json package."""
    try:
        return msgspec.json.encode(value)
    except UnicodeEncodeError:
        return json.dumps(msgspec.to_builtins(value)).encode("ascii")


def to_builtins(value: Any) -> Any:
    """``value`` as dicts, lists and str (bytes as base64): what a Celery task's arguments are."""
    return msgspec.to_builtins(value)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
