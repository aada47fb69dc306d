"""The daemon's socket protocol, defined once: the server (deskdex.daemon.server), the command line,
the tray and the ``deskdex`` fast path (deskdex.clients) all use this module, and a test checks that
docs/protocol.md lists exactly the ops and codes defined here.

Wire format: UTF-8 JSON, one object a line each way, many requests per connection.

    request   {"op": "search", "query": "tomato soup", "limit": 10}
    reply     {"ok": true, "result": {...}}
    error     {"ok": false, "error": {"code": "bad_query", "message": "...", "position": 7}}

An error carries a ``code`` from ``ERRORS``, a human ``message`` and, for some codes, structured
fields (a query error's ``position``) as fields, never to be parsed back out of the message. Each
code is one class of the deskdex.errors tree; ``error_from_reply`` turns an error reply back into
that exception on the client side, ``error_reply`` does the reverse on the server side.

Arguments are checked against ``OPS`` before an op runs (``check_args``): an unknown argument, a
missing one, or a value of the wrong type or out of range answers ``bad_args`` and the op never
sees it.

Every local user of an enterprise-mode daemon may send anything, so every request is bounded
before it costs much: a line of at most ``MAX_LINE`` bytes, nesting of at most ``MAX_NESTING``
arrays and objects (msgspec, which reads requests, stops at Python's recursion limit: the refusal is
``bad_request``, not a crash), a query of at most ``MAX_QUERY`` characters (and the
query language's own bounds, deskdex.index.query), ``limit`` and ``offset`` of at most
``MAX_LIMIT``. A request that breaks one answers an error of this table; none reaches an op.

Light on purpose (no typing, json, msgspec or dataclasses at run time): the fast path imports it.
The daemon reads requests and writes replies with msgspec; a client writes requests and reads
replies with this module's own small JSON codec (see ``dumps``), json.dumps's output byte for byte.
"""

from __future__ import annotations

import codecs  # loaded with the interpreter: free
import sys

from . import errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping, NotRequired, TypedDict

    # The search op's answer (JSON objects, so dicts): the one form of a search result, which
    # deskdex.index.search builds and the clients render, over the socket or straight from the index.
    # Types only: the fast path must not import typing.
    class SearchHit(TypedDict):
        uri: str
        path: str
        title: str
        snippet: str
        score: float
        mime: str
        mtime: int  # seconds since the epoch
        size: int  # bytes
        ext: str
        source: str  # "files" or "web"
        cluster: int  # 0: in no duplicate cluster
        highlights: list[list[int]] | None  # [start, end) character ranges in snippet; None: no snippets
        # Both for another user of an enterprise daemon: of the documents they may read.
        duplicates: int  # its copies (same text and format, or near-copies): what a collapsed hit stands for
        similar: int  # the other documents of its cluster (other formats, versions, translations): never hidden
        lang: str | None  # ISO 639-1 code of the language detected in its text; None: not told
        page: int | None  # paged documents: the 1-based page of the snippet's first highlight; else None
        # Found by meaning alone (docs/search.md, "Meaning"): it holds none of the query's words, and
        # ranks after every hit that does. Clients show such hits apart, as "related".
        related: bool

    class FacetValue(TypedDict):
        value: str
        count: int
        filter: str  # query-language text that narrows the query to this value

    class Facets(TypedDict):
        type: list[FacetValue]
        lang: list[FacetValue]
        folder: list[FacetValue]
        year: list[FacetValue]
        counted: int  # matches counted (the first MAX_COUNTED of index/facets.py)

    class Indexing(TypedDict):
        state: str  # the daemon's: starting, scanning (looking for files) or indexing
        first: bool  # its first pass over the folders since it started: the index is being built
        done: int | None  # files in the index (indexed or failed); None for another user of an enterprise daemon
        waiting: int  # files found and not done yet (status's queue)

    class SearchResults(TypedDict):
        total: int
        hits: list[SearchHit]
        related: NotRequired[int]  # of total, the documents found by meaning alone (hits marked related)
        facets: NotRequired[Facets]  # with the search op's facets argument
        indexing: NotRequired[Indexing]  # from a daemon that is indexing: more may match once it is done

    # The document op's answer: one indexed document's metadata and its text, block by block.
    class DocumentBlock(TypedDict):
        kind: str  # h, p, li, td, pre, quote (docs/tagged-text.md)
        level: int
        text: str  # the block's plain text, inline markup flattened
        page: int | None  # 1-based page the block starts on; None: the format has no pages
        boilerplate: bool
        marks: list[list[int]]  # [start, end) character ranges in text where the query's terms match

    class DocumentAnswer(TypedDict):
        uri: str
        path: str
        title: str
        mime: str
        size: int
        mtime: int
        lang: str | None
        pages: int | None
        source: str
        cluster: int
        duplicates: int
        similar: int
        blocks: list[DocumentBlock]
        marks: int  # the marks of every block returned, counted
        truncated: bool  # the document has more blocks than max_blocks

MAX_LINE = 1 << 20  # bytes: a request longer than this is refused, it cannot be one we understand
MAX_LIMIT = 10_000  # results one search may ask for: tantivy allocates room for them before searching
MAX_QUERY = 4096  # characters of a query: far above what people type, far below what costs seconds
MAX_URI = 8192  # characters of a document's URI an op takes: a path the kernel takes is at most 4096 bytes
MAX_BLOCKS = 100_000  # blocks of a document one document op may answer with
MAX_NESTING = 32  # arrays and objects within one another in a request; a request needs 2
SORTS = ("relevance", "date", "size")
# Where a document comes from (a hit's "source", the query's source:): local files, crawled pages, and
# the kinds of deskdex.sources (each RemoteSource's ``kind``; tests/test_sources.py checks they are here).
REMOTE_SOURCES = ("imap", "smb")  # opened as their server holds them (the original op), not from a path
SOURCES = ("files", "web", *REMOTE_SOURCES)
CRAWL_SCOPES = ("host", "domain", "prefix")  # where a crawl may go from its seeds (deskdex.webcrawl.urls)
CRAWL_STATES = ("waiting", "crawling", "done", "cancelled", "failed")  # of a crawl job; the last three are final
MAX_WAIT = 10  # seconds crawl_job may hold its answer back for the job to end
REQUIRED = object()  # the default of an argument that must be given


def indexing_said(indexing: Indexing) -> str:
    """A search answer's ``indexing`` in words, the same in ``deskdex search`` and the web page:
    "the index is being built: 120 of 3,000 files done"."""
    what = "the index is being built" if indexing["first"] else "the index is being brought up to date"
    done, waiting = indexing["done"], indexing["waiting"]
    if indexing["state"] != "indexing":  # no files counted yet: still walking the folders
        how_far = "looking for files" + (f" ({done:,} done so far)" if done else "")
    elif done is None:
        how_far = f"{waiting:,} file{'s' if waiting != 1 else ''} to go"
    else:
        how_far = f"{done:,} of {done + waiting:,} files found so far done"
    return f"{what}: {how_far}"


class Arg:
    """One argument of an op: its JSON type, default (REQUIRED if none), bounds and meaning."""

    __slots__ = ("name", "kind", "default", "doc", "minimum", "maximum", "choices", "nullable", "longest")

    def __init__(self, name: str, kind: type, default: Any, doc: str, *, minimum: int | None = None,
                 maximum: int | None = None, choices: tuple[str, ...] = (), nullable: bool = False,
                 longest: int | None = None) -> None:
        self.name, self.kind, self.default, self.doc = name, kind, default, doc
        self.minimum, self.maximum, self.choices, self.nullable = minimum, maximum, choices, nullable
        self.longest = longest  # a string's characters at most

    def check(self, op: str, value: Any) -> Any:
        """``value`` if it fits, else BadArgs saying why."""
        if value is None and self.nullable:
            return None
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)  # JSON writes 2.0 as 2
        if isinstance(value, bool) != (self.kind is bool) or not isinstance(value, self.kind):
            raise errors.BadArgs(f"{op}: {self.name} must be {self.type_name()}, not {_json_type(value)}")
        # Bounds are given for number arguments only, and value is of the argument's kind.
        if self.minimum is not None and isinstance(value, (int, float)) and value < self.minimum:
            raise errors.BadArgs(f"{op}: {self.name} must be at least {self.minimum}, not {value}")
        if self.maximum is not None and isinstance(value, (int, float)) and value > self.maximum:
            raise errors.BadArgs(f"{op}: {self.name} must be at most {self.maximum}, not {value}")
        if self.longest is not None and isinstance(value, str) and len(value) > self.longest:
            raise errors.BadArgs(f"{op}: {self.name} must be at most {self.longest} characters, not {len(value)}")
        if self.choices and value not in self.choices:
            raise errors.BadArgs(f"{op}: {self.name} must be one of {', '.join(self.choices)}, not {value!r}")
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise errors.BadArgs(f"{op}: {self.name} must be a list of strings")
        return value

    def type_name(self) -> str:
        name = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
                list: "a list of strings"}[self.kind]
        return name + (" or null" if self.nullable else "")


class Op:
    """One operation: its arguments, whether any local user may call it on an enterprise-mode
    daemon (``public``; the others are root's), and what it does and answers."""

    __slots__ = ("name", "args", "public", "doc")

    def __init__(self, name: str, doc: str, *args: Arg, public: bool = False) -> None:
        self.name, self.doc, self.public = name, doc, public
        self.args = {a.name: a for a in args}


def _path(doc: str) -> Arg:
    return Arg("path", str, REQUIRED, doc)


def _pattern(doc: str) -> Arg:
    return Arg("pattern", str, REQUIRED, doc)


def _job() -> Arg:
    return Arg("job", int, REQUIRED, "the job number the crawl op answered", minimum=1)


OPS: dict[str, Op] = {op.name: op for op in (
    Op("status", "The daemon's state (with the reason of a stall), queue, counts, failures by reason and when "
                 "the next is tried again, sizes, folders and notes. Another user of an enterprise-mode daemon "
                 "gets the counts of what they may read only.",
       Arg("failures", bool, False, "also list every failed file with its reason (root or the owner only)"),
       public=True),
    Op("search", "Ranked hits: {total, hits: [{uri, path, title, snippet, highlights, score, mime, mtime, size, "
                 "ext, source, cluster, duplicates, similar, lang, page}]}; page: the page of a paged "
                 "document the snippet's first highlight is on. While the daemon indexes, also indexing: {state, "
                 "first, done, waiting}: how far it is (more may match once it is done). Another user of an "
                 "enterprise-mode daemon finds only what they may read, ranked and counted from what they may "
                 "read alone (docs/search.md).",
       Arg("query", str, REQUIRED, "the query (docs/search.md)", longest=MAX_QUERY),
       Arg("limit", int, 10, "hits to return", minimum=1, maximum=MAX_LIMIT),
       Arg("offset", int, 0, "hits to skip first", minimum=0, maximum=MAX_LIMIT),
       Arg("sort", str, "relevance", "order of the hits", choices=SORTS),
       Arg("all", bool, False, "every copy, not one hit per group of copies"),
       Arg("snippets", bool, True, "compute snippets (off for paths only: faster)"),
       Arg("similar", str, None, "a hit's uri: every document of its cluster (copies and similar), ranked by "
                                 "the query, which may then be empty; none collapsed", nullable=True),
       Arg("facets", bool, False, "also count the first 1,000 matches by type, language, folder and year, each "
                                  "value with the filter that narrows the query to it"),
       Arg("words", bool, False, "by the words alone: without the documents related by meaning (hits marked "
                                 "related, after the words' hits; docs/search.md, \"Meaning\")"),
       public=True),
    Op("document", "One indexed document: {uri, path, title, mime, size, mtime, lang, pages, source, cluster, "
                   "duplicates, similar, blocks: [{kind, level, text, page, boilerplate, marks}], marks, truncated}; "
                   "marks are [start, end) ranges in a block's text where the query's terms match, as snippets "
                   "find them. Another user of an enterprise-mode daemon gets only a document they may read; "
                   "one not indexed and one not readable are both not_found.",
       Arg("uri", str, REQUIRED, "a hit's uri", longest=MAX_URI),
       Arg("query", str, "", "the query whose terms are marked (docs/search.md); empty: none", longest=MAX_QUERY),
       Arg("text", bool, True, "the text's blocks too (false: metadata only, blocks [])"),
       Arg("max_blocks", int, 20_000, "blocks to answer with at most", minimum=1, maximum=MAX_BLOCKS),
       public=True),
    Op("original", "A document of a mail account or network share as its server holds it now, for opening a hit: "
                   "{name, mime, size, data} (data: the bytes in base64; a member, such as a message's attachment: "
                   "its container's). Checked as document is: one the caller may not read is not_found. "
                   "source_unreachable when the server cannot be reached now.",
       Arg("uri", str, REQUIRED, "a hit's uri (of a source's document)", longest=MAX_URI), public=True),
    Op("pause", "Hold indexing (changes are kept and applied on resume); answers {state}."),
    Op("resume", "Resume indexing; answers {state, paused: false}."),
    Op("watch_list", "The watched folders: {folders: [{path, documents, failed, offline}]}."),
    Op("watch_add", "Watch one more folder (kept in the config file) and index it; answers as watch_list.",
       _path("an absolute path to a folder")),
    Op("watch_remove", "Stop watching a folder and drop its documents; answers as watch_list. A folder that "
                       "is not watched answers bad_args.", _path("a watched folder")),
    Op("exclude_list", "The configured exclusion patterns: {exclude: [...]}."),
    Op("exclude_add", "Add a gitignore-style pattern (kept in the config file); answers as exclude_list.",
       _pattern("a non-empty gitignore-style pattern")),
    Op("exclude_remove", "Remove a pattern; answers as exclude_list.", _pattern("a configured pattern")),
    Op("dups", "Without path: every duplicate cluster, {clusters: [{id, documents: [{uri, path, size, mtime, "
               "relation, similarity, identical_to}], reclaimable}], reclaimable}, the original first; "
               "reclaimable: the identical copies' bytes. "
               "With path: the near-duplicates of that file, indexed or not, {duplicates: [{uri, path, "
               "similarity}]} (converted outside every lock: searches go on meanwhile).",
       Arg("path", str, None, "a file on the daemon's machine", nullable=True)),
    Op("duplicates", "The other documents of a hit's duplicate cluster: {paths: [...]} (the tray's expand). "
                     "Another user of an enterprise-mode daemon gets those they may read of a document they may "
                     "read, else nothing.",
       Arg("uri", str, REQUIRED, "a hit's uri"), public=True),
    Op("index", "Index files and folders once, as `deskdex index` does without a daemon (the daemon is the "
                "one writer): answers when done with the same summary, {indexed, reused, unchanged, removed, "
                "members, failed, failed_by_reason, seconds, bytes, failures: [{path, reason, message}]}. "
                "Meanwhile status shows the files to go (queue) and the file at hand (current).",
       Arg("paths", list, REQUIRED, "absolute paths of files and folders")),
    Op("crawl", "Start a crawl in the daemon, the one `deskdex crawl` runs itself when no daemon does: {job}. "
                "Crawls run one at a time on the daemon's crawl thread, each page stored under its write lock; "
                "follow one with crawl_job, stop it with crawl_cancel.",
       Arg("urls", list, None, "seed URLs; null: every configured site", nullable=True),
       Arg("scope", str, None, "host, domain or prefix (null: host)", choices=CRAWL_SCOPES, nullable=True),
       Arg("max_pages", int, None, "pages to fetch at most (null: the site's, else crawl.max_pages)", minimum=1,
           nullable=True),
       Arg("max_depth", int, None, "links followed from a seed at most (null: crawl.max_depth)", minimum=0,
           nullable=True),
       Arg("topic", str, None, "focus on pages about these words", nullable=True),
       Arg("topic_from", list, None, "focus on pages like these documents (absolute paths on the daemon's "
                                     "machine, converted in a worker)", nullable=True),
       Arg("delay", float, None, "seconds between two requests to one site (null: crawl.delay)", minimum=0,
           nullable=True),
       Arg("allow_private", bool, False, "crawl private, loopback and link-local addresses too"),
       Arg("shard", str, "0/1", "I/N: only the sites whose host hashes to I of N")),
    Op("crawl_job", "A crawl started with the crawl op: {job, state, site, progress: {fetched, stored, failed}, "
                    "summary, message}; summary (once it has ended) is what `deskdex crawl --json` prints.",
       _job(), Arg("wait", float, 0.0, f"seconds to wait for the job to end before answering, at most {MAX_WAIT}",
                   minimum=0, maximum=MAX_WAIT)),
    Op("crawl_cancel", "Stop a crawl started with the crawl op (what it stored is kept); answers as crawl_job.",
       _job()),
    Op("crawl_reload", "The [crawl] table of the config file changed (deskdex crawl add, remove): read it again "
                       "now, crawl new sites, stop the upkeep of removed ones. Answers {sites: [URL]}."),
    Op("source_reload", "The sources of the config file changed (deskdex source add, remove): start the new ones "
                        "(and changed ones again), stop removed ones and drop what was indexed from them. Answers "
                        "{sources: [URL]}."),
    Op("source_sync", "Sync a mail account or network share now: {sources: [{url, state, error, last_sync, documents, "
                      "fetched, failed, failures, interval}]}, as status shows them; state is one of syncing, ok, "
                      "unreachable, refused, failed, paused, off.",
       Arg("url", str, None, "a configured source's URL; null: every source", nullable=True, longest=MAX_URI),
       Arg("wait", float, 0.0, f"seconds to wait for the syncs to end before answering, at most {MAX_WAIT}",
           minimum=0, maximum=MAX_WAIT)),
    Op("retry", "Convert again now the files whose failure may pass another time (timeout, crash, memory "
                "limit, unreadable, no converter), at or under path; answers {retrying: N} at once, the daemon converts them "
                "next. Other failures wait for their file to change.",
       Arg("path", str, None, "an absolute path to a file or folder; null: every such failure", nullable=True)),
)}

# Every error code a reply may carry, with its meaning, and the deskdex.errors class it stands for.
ERRORS: dict[str, tuple[type[errors.DeskdexError], str]] = {cls.code: (cls, meaning) for cls, meaning in (
    (errors.BadRequest, "the line is not a JSON object with a string \"op\""),
    (errors.TooLarge, f"the request line is longer than {MAX_LINE} bytes"),
    (errors.UnknownOp, "no such operation; the message lists those there are"),
    (errors.BadArgs, "an argument is missing, unknown, of the wrong type or out of range"),
    (errors.Forbidden, "the caller may not do this (an enterprise-mode daemon: only root changes things)"),
    (errors.Busy, "the caller has its share of the daemon already (connections, searches at once, requests "
                  "a second: an enterprise-mode daemon's limits per user); try again shortly"),
    (errors.QueryError, "the query is malformed; the error's position field says where"),
    (errors.NotFound, "no such document: not indexed, or not one the caller may read (the same answer for both)"),
    (errors.ConfigError, "a setting or folder is not acceptable (e.g. watch_add of something not a folder)"),
    (errors.SourceUnreachable, "a mail account or network share does not answer now (what was indexed from it stays)"),
    (errors.SourceRefused, "a mail account or network share refused the login, or no password is configured for it"),
    (errors.IndexMissing, "nothing has been indexed yet"),
    (errors.IndexBusy, "another process holds the index's writer lock"),
    (errors.StoreError, "the index or catalog failed; the daemon's log says why"),
    (errors.DiskFull, "no space left where the index lives; the daemon retries"),
    (errors.StoreLocked, "another program holds a lock on the catalog; the daemon retries"),
    (errors.StoreReadOnly, "the index cannot be written; the daemon retries"),
    (errors.ConversionError, "the file could not be converted; the message says why"),
    (errors.Interrupted, "the daemon stopped before the work asked for was done"),
    (errors.DaemonError, "the daemon failed on this request; its log has the traceback"),
)}


def check_args(op: Op, args: Mapping[str, Any]) -> dict[str, Any]:
    """The op's arguments with defaults filled in, or BadArgs naming what does not fit."""
    unknown = sorted(set(args) - set(op.args))
    if unknown:
        raise errors.BadArgs(f"{op.name}: unknown argument(s) {', '.join(unknown)}; it takes "
                             f"{', '.join(op.args) or 'none'}")
    out = {}
    for name, arg in op.args.items():
        if name in args:
            out[name] = arg.check(op.name, args[name])
        elif arg.default is REQUIRED:
            raise errors.BadArgs(f"{op.name}: missing argument {name!r}")
        else:
            out[name] = arg.default
    return out


def parse_request(line: bytes) -> tuple[Op, dict[str, Any]]:
    """One request line to its op and checked arguments; ProtocolError when it is not one."""
    msg = _decode_request(line)
    if _nesting(msg) > MAX_NESTING:
        raise errors.BadRequest(f"nested more than {MAX_NESTING} deep")
    if not isinstance(msg, dict) or not isinstance(msg.get("op"), str):
        raise errors.BadRequest('a request is a JSON object with a string "op"')
    name = msg.pop("op")
    op = OPS.get(name)
    if op is None:
        raise errors.UnknownOp(f"unknown op {name!r}; ops: {', '.join(sorted(OPS))}")
    return op, check_args(op, msg)


def _decode_request(line: bytes) -> Any:
    """The JSON value of a request line, BadRequest if it is not one. msgspec reads it (the daemon's
    side: strict, in C). What it refuses is read again by this module's decoder, which takes it as
    json.loads does (at most MAX_LINE bytes, rare): the escape of an unpaired surrogate
    (``"\\udcff"``, a file name that is not UTF-8, as os.fsdecode gives it), a number beyond a
    float (1e999: infinity, which the op's argument check then refuses as out of range)."""
    import msgspec

    try:
        return msgspec.json.decode(line)
    except RecursionError:  # msgspec's guard: Python's recursion limit, far past MAX_NESTING
        raise errors.BadRequest(f"nested more than {MAX_NESTING} deep") from None
    except msgspec.DecodeError as exc:  # ValidationError too: a number out of range
        refused = exc
    try:
        return loads(line.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise errors.BadRequest(f"not JSON: {refused}") from None
    except RecursionError:
        raise errors.BadRequest(f"nested more than {MAX_NESTING} deep") from None


def _nesting(value: Any, depth: int = 1) -> int:
    """How deep arrays and objects go in ``value`` (1: none inside it), counted up to MAX_NESTING + 1."""
    if depth > MAX_NESTING:
        return depth
    inner = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return max((_nesting(v, depth + 1) for v in inner if isinstance(v, (dict, list))), default=depth)


def request_line(op: str, args: Mapping[str, Any]) -> bytes:
    return (dumps({"op": op, **args}) + "\n").encode("utf-8")


def result_reply(result: Any) -> bytes:
    return _reply({"ok": True, "result": result})


def error_reply(exc: errors.DeskdexError, anyone: bool = False) -> bytes:
    """The reply for ``exc``. ``anyone``: the caller is any local user of an enterprise-mode daemon,
    who gets no message that could name internal paths or classes, only the code's meaning."""
    return _reply({"ok": False, "error": error_object(exc, anyone)})


def error_object(exc: errors.DeskdexError, anyone: bool = False) -> dict[str, Any]:
    """The ``error`` member of a reply: {code, message, ...fields}; the web UI answers with it too."""
    code = exc.code if exc.code in ERRORS else errors.DaemonError.code
    message = str(exc) if exc.shown_to_anyone or not anyone else ERRORS[code][1]
    return {"code": code, "message": message, **exc.fields()}


def _reply(reply: Any) -> bytes:
    """A reply line, by msgspec (the daemon's side, where a reply may hold thousands of hits). A
    string with an unpaired surrogate (a file name that is not UTF-8) is not UTF-8 for msgspec:
    that reply is written by this module's encoder, escaping it as JSON allows. msgspec writes NaN
    as null; no reply holds one (scores are finite)."""
    import msgspec

    try:
        return msgspec.json.encode(reply) + b"\n"
    except UnicodeEncodeError:
        return (dumps(reply) + "\n").encode("ascii")
    except msgspec.EncodeError as exc:  # as dumps: a value the socket cannot carry
        raise TypeError(str(exc)) from None


def parse_reply(line: bytes) -> Any:
    """The result of a reply line, or the exception its error stands for, raised."""
    try:
        reply = _decode_reply(line)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise errors.DaemonError(f"the daemon sent something that is not JSON: {exc}") from None
    if not isinstance(reply, dict):
        raise errors.DaemonError(f"the daemon sent {reply!r}, not a reply")
    if reply.get("ok") is True:
        return reply.get("result")
    raise error_from_reply(reply.get("error"))


def _decode_reply(line: bytes) -> Any:
    """A reply's JSON value: by this module's decoder (the fast path), by msgspec's when the reply
    is long or msgspec is loaded already (the tray, after its first long reply)."""
    if len(line) > _BIG_REPLY or "msgspec" in sys.modules:
        import msgspec

        try:
            return msgspec.json.decode(line)
        except msgspec.DecodeError:  # an unpaired surrogate's escape (see _decode_request), or not JSON
            pass
    return loads(line.decode("utf-8"))


def error_from_reply(error: Any) -> errors.DeskdexError:
    """The exception an error reply stands for: the class of its code, with its fields."""
    if not isinstance(error, dict):
        return errors.DaemonError(f"the daemon answered with an error it did not describe: {error!r}")
    code, message = str(error.get("code", "internal")), str(error.get("message", ""))
    fields = {k: v for k, v in error.items() if k not in ("code", "message")}
    cls = ERRORS[code][0] if code in ERRORS else None
    if cls is None:
        return errors.DaemonError(message, code)
    return cls.from_wire(message, fields)


# -- JSON for the client side, importing nothing ---------------------------------------------------
# The ``deskdex`` command's fast path (deskdex.clients.launch) asks the daemon a search in about a
# millisecond; the json package costs more than that to import (it loads re), msgspec ten times more
# (typing, re, inspect, decimal: measured 57 ms against the fast path's 5 ms of imports). So requests
# are written and replies read by the small codec below: JSON as RFC 8259 has it, written exactly as
# json.dumps writes it (its escapes, floats by repr, NaN refused). The daemon reads requests and
# writes replies with msgspec; a reply too long for this codec to read quickly goes through msgspec.
_BIG_REPLY = 64 << 10  # bytes: from here on, msgspec reads a reply faster than this codec, its import included

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_ESCAPES.update({chr(i): f"\\u{i:04x}" for i in range(0x20) if chr(i) not in _ESCAPES})
_ESCAPE = str.maketrans(_ESCAPES)
_CONTROL = frozenset(chr(i) for i in range(0x20))  # not allowed unescaped in a JSON string
_UNESCAPE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")
_NUMBER = frozenset("+-0123456789.eE")  # frozensets: "" (the end of the text) is in none
_NUMBER_START = frozenset("-0123456789")
_SPACE = frozenset(" \t\r\n")
_INF = float("inf")


def _ascii_escapes(exc: UnicodeError) -> tuple[str, int]:
    """str.encode's error handler "deskdex.json": what is not ASCII as JSON's \\uXXXX escapes (a
    surrogate pair above U+FFFF; an unpaired surrogate, a file name that is not UTF-8, as itself)."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for c in exc.object[exc.start:exc.end]:
        n = ord(c)
        if n > 0xFFFF:
            n -= 0x10000
            out.append(f"\\u{0xD800 | n >> 10:04x}\\u{0xDC00 | n & 0x3FF:04x}")
        else:
            out.append(f"\\u{n:04x}")
    return "".join(out), exc.end


codecs.register_error("deskdex.json", _ascii_escapes)


def dumps(obj: Any, ascii_only: bool = True, spaced: bool = False) -> str:
    """JSON text of ``obj``, as json.dumps(obj, ensure_ascii=ascii_only, allow_nan=False) writes it;
    ``spaced``: with json.dumps's default ", " and ": " (for people), else none. TypeError for a value
    JSON has no form for, ValueError for NaN and infinities."""
    out: list[str] = []
    _encode(obj, out, ascii_only, ", " if spaced else ",", ": " if spaced else ":")
    return "".join(out)


def _encode(obj: Any, out: list[str], ascii_only: bool, item: str, key: str) -> None:
    kind = type(obj)
    if kind is str:
        out.append(_string(obj, ascii_only))
    elif kind is dict:
        out.append("{")
        for n, (k, v) in enumerate(obj.items()):
            if n:
                out.append(item)
            out.append(_string(k if type(k) is str else _key(k), ascii_only))
            out.append(key)
            _encode(v, out, ascii_only, item, key)
        out.append("}")
    elif kind is list or kind is tuple:
        out.append("[")
        for n, v in enumerate(obj):
            if n:
                out.append(item)
            _encode(v, out, ascii_only, item, key)
        out.append("]")
    elif obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, int):
        out.append(int.__repr__(obj))
    elif isinstance(obj, float):
        out.append(_float(obj))
    elif isinstance(obj, str):  # a subclass: written as its str
        out.append(_string(str.__str__(obj), ascii_only))
    elif isinstance(obj, (dict, list, tuple)):
        _encode(dict(obj) if isinstance(obj, dict) else list(obj), out, ascii_only, item, key)
    else:
        raise TypeError(f"{type(obj).__name__} cannot cross the socket")


def _string(s: str, ascii_only: bool) -> str:
    # isprintable is false for every control character (and for some others, then escaped for nothing).
    if not s.isprintable() or '"' in s or "\\" in s:
        s = s.translate(_ESCAPE)
    if ascii_only:
        if not s.isascii():
            s = s.encode("ascii", "deskdex.json").decode("ascii")
        if "\x7f" in s:  # ASCII, but json.dumps escapes it: the same bytes as json.dumps's
            s = s.replace("\x7f", "\\u007f")
    return f'"{s}"'


def _float(x: float) -> str:
    if x != x or x in (_INF, -_INF):
        raise ValueError(f"{x!r} is not JSON")
    return float.__repr__(x)


def _key(k: Any) -> str:
    """An object's key as json.dumps turns it into a string."""
    if isinstance(k, str):
        return k
    if k is None or isinstance(k, bool):
        return {None: "null", True: "true", False: "false"}[k]
    if isinstance(k, int):
        return int.__repr__(k)
    if isinstance(k, float):
        return _float(k)
    raise TypeError(f"a key of type {type(k).__name__} cannot cross the socket")


def loads(text: str) -> Any:
    """The value of the JSON text ``text``; ValueError saying where it is not JSON (NaN and
    Infinity are not: json.loads takes them)."""
    value, end = _scan(text, _skip_space(text, 0))
    end = _skip_space(text, end)
    if end != len(text):
        raise ValueError(f"extra data at {end}")
    return value


def _scan(s: str, i: int) -> tuple[Any, int]:
    """The JSON value that starts at ``s[i]`` and where it ends."""
    c = s[i:i + 1]
    if c == '"':
        return _scan_string(s, i + 1)
    if c == "{":
        obj: dict[str, Any] = {}
        i += 1
        if s[i:i + 1] in _SPACE:
            i = _skip_space(s, i)
        if s[i:i + 1] == "}":
            return obj, i + 1
        while True:
            if s[i:i + 1] != '"':
                raise ValueError(f"expected a string key at {i}")
            k, i = _scan_string(s, i + 1)
            if s[i:i + 1] in _SPACE:
                i = _skip_space(s, i)
            if s[i:i + 1] != ":":
                raise ValueError(f"expected ':' at {i}")
            i += 1
            if s[i:i + 1] in _SPACE:
                i = _skip_space(s, i)
            obj[k], i = _scan(s, i)
            c = s[i:i + 1]
            if c in _SPACE:
                i = _skip_space(s, i)
                c = s[i:i + 1]
            if c == "}":
                return obj, i + 1
            if c != ",":
                raise ValueError(f"expected ',' or '}}' at {i}")
            i += 1
            if s[i:i + 1] in _SPACE:
                i = _skip_space(s, i)
    if c == "[":
        arr: list[Any] = []
        i += 1
        if s[i:i + 1] in _SPACE:
            i = _skip_space(s, i)
        if s[i:i + 1] == "]":
            return arr, i + 1
        while True:
            value, i = _scan(s, i)
            arr.append(value)
            c = s[i:i + 1]
            if c in _SPACE:
                i = _skip_space(s, i)
                c = s[i:i + 1]
            if c == "]":
                return arr, i + 1
            if c != ",":
                raise ValueError(f"expected ',' or ']' at {i}")
            i += 1
            if s[i:i + 1] in _SPACE:
                i = _skip_space(s, i)
    if c in _NUMBER_START:
        j = i + 1
        while s[j:j + 1] in _NUMBER:
            j += 1
        token = s[i:j]
        digits = token[1:] if c == "-" else token
        dot = token.find(".")
        if not digits[:1].isdigit() or digits[:1] == "0" and digits[1:2].isdigit() \
                or dot >= 0 and not token[dot + 1:dot + 2].isdigit():
            raise ValueError(f"a malformed number at {i}")
        try:
            return (float(token) if "." in token or "e" in token or "E" in token else int(token)), j
        except ValueError:
            raise ValueError(f"a malformed number at {i}") from None
    if c == "t" and s.startswith("true", i):
        return True, i + 4
    if c == "f" and s.startswith("false", i):
        return False, i + 5
    if c == "n" and s.startswith("null", i):
        return None, i + 4
    raise ValueError(f"expected a JSON value at {i}")


def _scan_string(s: str, i: int) -> tuple[str, int]:
    """The string whose text starts at ``s[i]`` (after its quote), and where it ends."""
    chunks = []
    while True:
        end = s.find('"', i)
        if end < 0:
            raise ValueError(f"a string not closed, from {i - 1}")
        slash = s.find("\\", i, end)
        raw = s[i:end if slash < 0 else slash]
        if not raw.isprintable() and not _CONTROL.isdisjoint(raw):
            raise ValueError(f"a control character in the string at {i - 1}")
        chunks.append(raw)
        if slash < 0:
            return "".join(chunks), end + 1
        escape = s[slash + 1:slash + 2]
        if escape == "u":
            n, i = _hex4(s, slash + 2)
            if 0xD800 <= n < 0xDC00 and s.startswith("\\u", i):  # a surrogate pair: one character
                low, j = _hex4(s, i + 2)
                if 0xDC00 <= low < 0xE000:
                    n, i = 0x10000 + (n - 0xD800 << 10) + (low - 0xDC00), j
            chunks.append(chr(n))
        elif escape in _UNESCAPE:
            chunks.append(_UNESCAPE[escape])
            i = slash + 2
        else:
            raise ValueError(f"an invalid escape at {slash}")


def _hex4(s: str, i: int) -> tuple[int, int]:
    digits = s[i:i + 4]
    if len(digits) != 4 or not _HEX.issuperset(digits):
        raise ValueError(f"an invalid \\u escape at {i - 2}")
    return int(digits, 16), i + 4


def _skip_space(text: str, i: int) -> int:
    while text[i:i + 1] in _SPACE:
        i += 1
    return i


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)
