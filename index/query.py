"""The query language (docs/search.md), parsed into tantivy queries.

    words        stemmed, accent-insensitive; all must match (AND is the default)
    "a phrase"   exact phrase            index*  prefix        serch~  fuzzy (~2: two edits)
    a OR b, a AND b, NOT a, -a, ( ... )  grouping
    title: author: path:/in: ext: type: after: before: size: dup: source: lang:   field filters

A malformed query raises QueryError with the position (0-based character offset) of the problem.

Any local user of an enterprise-mode daemon may search, so what one query may cost is bounded
here, before tantivy sees it, and a query past a bound is a QueryError at the place it passes it:
its length (deskdex.protocol.MAX_QUERY), the words it searches for (MAX_WORDS, phrases' words
counted one by one), the prefix and fuzzy patterns in it (MAX_PATTERNS: each is an automaton run
over the term dictionary of every text field, and tantivy keeps a bit per document of each
segment for each, so a few thousand patterns took gigabytes), the letters of one pattern
(MAX_PATTERN_LETTERS) and how deep parentheses go (MAX_DEPTH: the parser recurses on them).
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
from dataclasses import dataclass
from typing import Callable, Protocol

import tantivy

from deskdex.converters import LANGUAGE_CODES as CODES
from deskdex.errors import QueryError
from deskdex.protocol import MAX_QUERY, SOURCES

from . import fulltext

Occur = tantivy.Occur
TEXT_FIELDS = ("title", "headings", "anchors", "body", "boiler", "author", "path", "name")
# A word searched in ``body`` is searched in the body of every language (index/fulltext.py), each
# analyzed as that field analyzes its text: the user does not say the language of the query.
BODIES = ("body", *(fulltext.body_field(code) for code in fulltext.STEMMED))

# `type:` groups of MIME types (documented in docs/search.md).
TYPE_GROUPS: dict[str, tuple[str, ...]] = {
    "pdf": ("application/pdf",),
    "doc": ("application/vnd.openxmlformats-officedocument.wordprocessingml.document", "application/msword",
            "application/vnd.oasis.opendocument.text", "application/rtf", "text/rtf", "application/epub+zip",
            "application/postscript", "image/vnd.djvu", "application/x-fictionbook+xml", "application/x-abiword",
            "application/x-dvi"),
    "sheet": ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "application/vnd.ms-excel",
              "application/vnd.oasis.opendocument.spreadsheet", "text/csv", "text/tab-separated-values",
              "application/x-gnumeric"),
    "slides": ("application/vnd.openxmlformats-officedocument.presentationml.presentation",
               "application/vnd.ms-powerpoint", "application/vnd.oasis.opendocument.presentation"),
    "mail": ("message/rfc822", "application/mbox"),
    "image": ("image/png", "image/jpeg", "image/gif", "image/tiff", "image/webp", "image/svg+xml", "image/bmp"),
    "audio": ("audio/mpeg", "audio/flac", "audio/ogg", "audio/opus", "audio/mp4", "audio/wav", "audio/aiff",
              "audio/x-ms-wma"),
    "video": ("video/mp4", "video/x-ms-wmv", "video/x-ms-asf", "video/quicktime", "video/x-matroska", "video/webm",
              "video/x-msvideo", "video/x-flv"),
    "code": ("text/x-source", "text/x-python", "text/x-c", "text/x-java", "text/x-shellscript", "application/javascript",
             "application/json", "application/xml", "text/xml"),
    "web": ("text/html", "application/xhtml+xml"),
    "text": ("text/plain", "text/markdown", "text/x-rst", "text/troff"),
    "archive": ("application/zip", "application/x-tar", "application/gzip", "application/x-bzip2", "application/x-xz",
                "application/warc"),
}
_GROUP_OF = {mime: group for group, mimes in TYPE_GROUPS.items() for mime in mimes}


def type_group(mime: str) -> str | None:
    """The ``type:`` group of a MIME type ("sheet", "pdf", ...), or None for one of no group."""
    return _GROUP_OF.get(mime)


def narrowed(query: str, filters: list[str]) -> str:
    """``query`` with each of ``filters`` (a facet's ``type:sheet``, ``folder:...``) it lacks added;
    in parentheses when it has an OR, which binds looser than the AND they are joined with
    (docs/search.md, "Facets"). The web page's facet links and the tray's filters."""
    query = query.strip()
    extra = " ".join(f for f in filters if f not in query)
    if not extra:
        return query
    return f"({query}) {extra}" if query and re.search(r"\bOR\b", query) else f"{query} {extra}".strip()


MAX_WORDS = 256  # words searched for, in all fields (each is a term query per text field)
MAX_PATTERNS = 16  # prefix (word*) and fuzzy (word~) patterns
MAX_PATTERN_LETTERS = 64  # of the word of one pattern (a fuzzy automaton grows with it)
MAX_DEPTH = 16  # parentheses within parentheses
# A group of several words all in a document's title adds that title's BM25 over those words
# times this and the title's weight (Parser._title_holds_all).
TITLE_ALL = 1.0
# A body holding a group's words within PROXIMITY_SLOP positions of one another (in any order)
# adds this times the body's weight (Parser._near): a person remembers words that stood
# together, and a long text holding them pages apart is less likely what they saw. Tuned on
# known items (docs/benchmarks.md, "Ranking for known items").
PROXIMITY = 2.0
PROXIMITY_SLOP = 8
# Fields scored as BM25F would (see Parser._phrase) when a word is searched in every text field.
LEVELLED: tuple[str, ...] = ("title", "path", "name", "author")
_BIGGEST = 2**63 - 1  # tantivy's integers (sizes, dates) are 64-bit

_TOKEN = re.compile(r'\s+|\(|\)|"[^"]*"?|[^\s()"]+')
_SIZE = re.compile(r"^(>=|<=|>|<|=)?(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?$", re.I)
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 10**6, "mb": 10**6, "mib": 2**20,
          "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12, "tib": 2**40}


@dataclass(slots=True)
class _Tok:
    text: str
    pos: int


def tokenize(query: str) -> list[_Tok]:
    out = []
    for m in _TOKEN.finditer(query):
        t = m.group(0)
        if t.isspace():
            continue
        if t.startswith('"') and (len(t) == 1 or not t.endswith('"')):
            raise QueryError(f"unclosed quote at position {m.start()}", m.start())
        out.append(_Tok(t, m.start()))
    return out


class WordStats(Protocol):
    """Word statistics LEVELLED fields are weighed by: a tantivy Searcher's, or several indexes'
    pooled (index/shards.py), so that shards weigh a word as one index would."""

    @property
    def num_docs(self) -> int: ...

    def doc_freq(self, field_name: str, field_value: str) -> int: ...


class Parser:
    def __init__(self, schema: tantivy.Schema, query: str, now: Callable[[], dt.datetime] = dt.datetime.now,
                 constant: bool = False, has_dup: Callable[[], tantivy.Query] | None = None,
                 searcher: WordStats | None = None) -> None:
        """``constant``: every clause scores its field weight when it matches, instead of BM25,
        so a score depends on the document and the query alone (index/search.py, for a reader
        of an enterprise-mode daemon). ``has_dup``: what ``dup:yes`` matches, when not every
        document with a cluster id (a reader's duplicates are only those it may read).
        ``searcher``: the index's word statistics, for LEVELLED fields (without it, or with
        ``constant``, a title scores BM25 on its own field, as with any other field)."""
        if len(query) > MAX_QUERY:
            raise QueryError(f"the query is longer than {MAX_QUERY} characters", MAX_QUERY)
        self.schema = schema
        self.query = query
        self.toks = tokenize(query)
        self.i = 0
        self.now = now
        self.constant = constant
        self.has_dup = has_dup
        self.searcher = None if constant else searcher
        self.words = self.patterns = self.depth = 0  # what the query costs so far (module docstring)
        # (field, term) of every word the query scores by BM25: the word statistics a search over
        # shards elsewhere pools before it asks them (index/shards.py).
        self.terms: set[tuple[str, str]] = set()

    def _cost(self, pos: int, words: int, patterns: int = 0) -> None:
        """Count ``words`` and ``patterns`` more at ``pos``; QueryError past a bound."""
        self.words += words
        self.patterns += patterns
        if self.words > MAX_WORDS:
            raise QueryError(f"more than {MAX_WORDS} words at position {pos}: search for fewer", pos)
        if self.patterns > MAX_PATTERNS:
            raise QueryError(f"more than {MAX_PATTERNS} prefix or fuzzy words at position {pos}: "
                             "use fewer, or whole words", pos)

    def parse(self) -> tantivy.Query:
        if not self.toks:
            raise QueryError("empty query: give at least one word", 0)
        q = self._or()
        if self.i < len(self.toks):
            t = self.toks[self.i]
            what = "unmatched ')'" if t.text == ")" else f"unexpected {t.text!r}"
            raise QueryError(f"{what} at position {t.pos}", t.pos)
        return q

    # -- grammar -----------------------------------------------------------------------------
    def _peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def _or(self) -> tantivy.Query:
        parts = [self._and()]
        while (t := self._peek()) and t.text == "OR":
            self.i += 1
            if self._peek() is None:
                raise QueryError(f"OR at position {t.pos} has nothing after it", t.pos)
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else tantivy.Query.boolean_query([(Occur.Should, p) for p in parts])

    def _and(self) -> tantivy.Query:
        clauses: list[tuple[tantivy.Occur, tantivy.Query]] = []
        words: list[str] = []  # its plain words and phrases (searched in every text field)
        while (t := self._peek()) and t.text not in ("OR", ")"):
            if t.text == "AND":
                self.i += 1
                after = self._peek()
                if after is None or after.text in ("OR", ")", "AND"):
                    raise QueryError(f"AND at position {t.pos} has nothing after it", t.pos)
                continue
            negate = False
            if t.text == "NOT":
                self.i += 1
                negate = True
                if self._peek() is None:
                    raise QueryError(f"NOT at position {t.pos} has nothing after it", t.pos)
            elif t.text.startswith("-") and len(t.text) > 1:
                t.text = t.text[1:]
                t.pos += 1
                negate = True
            elif t.text.startswith("+") and len(t.text) > 1:
                t.text, t.pos = t.text[1:], t.pos + 1
            if not negate and _plain(t.text):
                words.append(t.text)
            clauses.append((Occur.MustNot if negate else Occur.Must, self._primary()))
        if not clauses:
            t = self._peek()
            pos = t.pos if t else len(self.query)
            raise QueryError(f"expected a word at position {pos}", pos)
        if all(o == Occur.MustNot for o, _ in clauses):
            clauses.append((Occur.Must, tantivy.Query.all_query()))
        if len(words) > 1 and TITLE_ALL > 0 and not self.constant:  # constant: the fields matched, no more
            clauses.append((Occur.Should, self._title_holds_all(words)))
        if len(words) > 1 and PROXIMITY > 0 and not self.constant:
            clauses.append((Occur.Should, self._near(words)))
        return clauses[0][1] if len(clauses) == 1 and clauses[0][0] == Occur.Must else \
            tantivy.Query.boolean_query(clauses)

    def _primary(self) -> tantivy.Query:
        t = self._peek()
        assert t is not None
        self.i += 1
        if t.text == "(":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise QueryError(f"parentheses more than {MAX_DEPTH} deep at position {t.pos}", t.pos)
            q = self._or()
            close = self._peek()
            if close is None or close.text != ")":
                raise QueryError(f"parenthesis opened at position {t.pos} is never closed", t.pos)
            self.i += 1
            self.depth -= 1
            return q
        if t.text == ")":
            raise QueryError(f"unmatched ')' at position {t.pos}", t.pos)
        m = re.match(r"^([a-z]+):(.*)$", t.text, re.S)
        if m and m.group(1) in FIELDS:
            value, vpos = m.group(2), t.pos + len(m.group(1)) + 1
            if not value and (nxt := self._peek()) and nxt.text.startswith('"'):
                self.i += 1
                value, vpos = nxt.text, nxt.pos
            if not value:
                raise QueryError(f"{m.group(1)}: at position {t.pos} needs a value", t.pos)
            if m.group(1) not in ("title", "author"):  # those count their words themselves
                self._cost(t.pos, 1)
            return FIELDS[m.group(1)](self, value, vpos)
        return self._words(t.text, t.pos, TEXT_FIELDS)

    # -- leaves ------------------------------------------------------------------------------
    def _weigh(self, q: tantivy.Query, weight: float) -> tantivy.Query:
        """A clause scored by BM25 times ``weight``, or (constant) ``weight`` alone. Prefix, fuzzy,
        range and set clauses score a constant in tantivy already."""
        return tantivy.Query.const_score_query(q, weight) if self.constant else tantivy.Query.boost_query(q, weight)

    def _title_holds_all(self, words: list[str]) -> tantivy.Query:
        """What a title holding every word and phrase of ``words`` adds: a title counts for much
        when it names what the query names, and (levelled in each word's clause) for little when
        it shares one word of several."""
        parts = []
        for text in words:
            terms = fulltext.analyze(text.strip('"'))
            if terms:
                self.terms.update(("title", t) for t in terms)
                parts.append((Occur.Must, tantivy.Query.term_query(self.schema, "title", terms[0]) if len(terms) == 1
                              else tantivy.Query.phrase_query(self.schema, "title", [*terms])))
        if len(parts) < 2:  # one word left with something to look for in a title: no bonus
            return tantivy.Query.empty_query()
        return self._weigh(tantivy.Query.boolean_query(parts), fulltext.FIELD_BOOSTS.get("title", 1.0) * TITLE_ALL)

    def _near(self, words: list[str]) -> tantivy.Query:
        """What a body holding every word of ``words`` close together adds (PROXIMITY): the words
        (a phrase's in turn) as one phrase with PROXIMITY_SLOP gaps, in each language's body.
        A constant, not the loose phrase's BM25: that depends on one index's statistics, which
        a search over shards cannot pool for a phrase (index/shards.py), and scored so it
        ranked the known items no better (docs/benchmarks.md)."""
        english = [fulltext.analyze(text.strip('"')) for text in words]
        options = []
        for f in BODIES:
            terms = [t for text, en in zip(words, english) for t in _terms(f, text.strip('"'), en)]
            if len(terms) < 2:
                continue
            self.terms.update((f, t) for t in terms)
            options.append(tantivy.Query.phrase_query(self.schema, f, [*terms], PROXIMITY_SLOP))
        if not options:
            return tantivy.Query.empty_query()
        near = options[0] if len(options) == 1 else tantivy.Query.boolean_query([(Occur.Should, o) for o in options])
        return tantivy.Query.const_score_query(near, fulltext.FIELD_BOOSTS.get("body", 1.0) * PROXIMITY)

    def _words(self, text: str, pos: int, fields: tuple[str, ...]) -> tantivy.Query:
        if text.startswith('"'):
            return self._phrase(text.strip('"'), pos, fields)
        if text.endswith("*") and len(text) > 1:
            return self._prefix(text[:-1], pos, fields)
        fuzzy = re.match(r"^(.+)~([12]?)$", text)
        if fuzzy:
            return self._fuzzy(fuzzy.group(1), int(fuzzy.group(2) or 1), pos, fields)
        return self._phrase(text, pos, fields)

    def _phrase(self, text: str, pos: int, fields: tuple[str, ...]) -> tantivy.Query:
        terms = fulltext.analyze(text)
        self._cost(pos, max(1, len(terms), len(fulltext.analyze_path(text)) if "path" in fields else 0)
                   + sum(len(run) for run in fulltext.CJK.findall(text)))
        options = []
        for f in _expand(fields):
            analyzer_terms = _terms(f, text, terms)
            if not analyzer_terms:
                continue
            self.terms.update((f, t) for t in analyzer_terms)
            q = (tantivy.Query.term_query(self.schema, f, analyzer_terms[0]) if len(analyzer_terms) == 1
                 else tantivy.Query.phrase_query(self.schema, f, [*analyzer_terms]))  # a list of str | (pos, str)
            weight = fulltext.FIELD_BOOSTS.get(f, 1.0)
            if f in LEVELLED and len(fields) > 1 and self.searcher is not None:
                # A title (a path, an author) is a few words, and a word is rare among titles: BM25
                # on that field alone, with the word's rarity among titles, gave one word in a title
                # more than every word many times in a body. As BM25F does, the word weighs by its
                # rarity in the whole collection (the field's length still counts).
                weight *= self._levelled(f, analyzer_terms)
            options.append(self._weigh(q, weight))
        for run in fulltext.CJK.findall(text):
            cjk = cjk_query(self.schema, run)
            options.append(tantivy.Query.const_score_query(cjk, 1.0) if self.constant else cjk)
        if not options:
            raise QueryError(f"{text!r} at position {pos} has no searchable word", pos)
        return options[0] if len(options) == 1 else tantivy.Query.disjunction_max_query(options, 0.1)

    def _levelled(self, field: str, terms: list[str]) -> float:
        """The collection's idf of ``terms`` over their idf in ``field`` alone (BM25 sums a phrase's
        idfs): what turns BM25 on ``field`` into BM25 with the collection's idf. A document has
        a word "in the collection" when it has it in its body, title or ``field``; the largest of
        those counts stands for it (most titles repeat in their body)."""
        assert self.searcher is not None
        n = max(1, self.searcher.num_docs)

        def idf(df: int) -> float:
            df = min(df, n)  # doc_freq counts deleted documents until their segment is merged
            return math.log(1 + (n - df + 0.5) / (df + 0.5))

        own = anywhere = 0.0
        for t in terms:
            df = self.searcher.doc_freq(field, t)
            stems = fulltext.analyze(t) if field == "path" else [t]  # path words are not stemmed
            df_all = max([df] + [self.searcher.doc_freq(f, s) for s in stems for f in ("body", "title")])
            own, anywhere = own + idf(df), anywhere + idf(df_all)
        return anywhere / own if own > 0 else 1.0

    def _pattern(self, word: str, pos: int) -> None:
        """Count one prefix or fuzzy pattern of ``word`` at ``pos``, refusing one too long."""
        self._cost(pos, 1, 1)
        if len(word) > MAX_PATTERN_LETTERS:
            raise QueryError(f"a prefix or fuzzy word at position {pos} is longer than {MAX_PATTERN_LETTERS} "
                             "letters", pos)

    def _prefix(self, stem: str, pos: int, fields: tuple[str, ...]) -> tantivy.Query:
        self._pattern(stem, pos)
        terms = fulltext.analyze_path(stem)
        if len(terms) != 1 or len(terms[0]) < 2:
            raise QueryError(f"prefix at position {pos} needs at least two letters of one word before *", pos)
        pattern = re.escape(terms[0]) + ".*"
        return tantivy.Query.boolean_query([(Occur.Should, tantivy.Query.regex_query(self.schema, f, pattern))
                                            for f in _expand(fields)])

    def _fuzzy(self, word: str, distance: int, pos: int, fields: tuple[str, ...]) -> tantivy.Query:
        self._pattern(word, pos)
        terms = fulltext.analyze(word)
        if len(terms) != 1:
            raise QueryError(f"fuzzy search at position {pos} works on one word", pos)
        return tantivy.Query.boolean_query([
            (Occur.Should, tantivy.Query.fuzzy_term_query(self.schema, f, key[0], distance, True, False))
            for f in _expand(fields) if f != "path" and len(key := _terms(f, word, terms)) == 1])

    def _filter(self, field: str, value: str | tantivy.Facet) -> tantivy.Query:
        """A term filter (ext:, source:, lang:, a folder): BM25 as before, or 1 when constant
        (its idf would count every document of the index)."""
        if isinstance(value, str):
            self.terms.add((field, value))
        q = tantivy.Query.term_query(self.schema, field, value)
        return tantivy.Query.const_score_query(q, 1.0) if self.constant else q

    def _range(self, field: str, lo: int | None, hi: int | None) -> tantivy.Query:
        return tantivy.Query.range_query(self.schema, field, tantivy.FieldType.Integer, lo, hi)


def _expand(fields: tuple[str, ...]) -> tuple[str, ...]:
    """``fields`` with ``body`` standing for the body fields of every language."""
    return tuple(x for f in fields for x in (BODIES if f == "body" else (f,)))


def _terms(field: str, text: str, english: list[str]) -> list[str]:
    """The terms of ``text`` in ``field``, as its analyzer makes them (``english``: those of the
    English-stemmed fields, computed once)."""
    if field == "path":
        return fulltext.analyze_path(text)
    if field == "name":
        return fulltext.analyze(fulltext.name_words(text))
    if field.startswith("body_"):
        return fulltext.analyze(text, field[len("body_"):])
    return english


def _lang(p: Parser, v: str, pos: int) -> tantivy.Query:
    code = fulltext.language_code(v) or (v.lower() if v.lower() in CODES else None)
    if code is None:
        raise QueryError(f"unknown language {v!r} at position {pos}: use a code (de, fr) or an English name "
                         f"({', '.join(sorted(fulltext.LANGUAGES.values()))})", pos)
    return p._filter("lang", code)


def _plain(text: str) -> bool:
    """A word or phrase searched in every text field: not a field filter, group, prefix or fuzzy word."""
    if text.startswith('"'):
        return True
    m = re.match(r"^([a-z]+):", text)
    return (text not in ("(", ")") and not (m and m.group(1) in FIELDS) and not text.endswith("*")
            and re.search(r"~[12]?$", text) is None)


def _title(p: Parser, v: str, pos: int) -> tantivy.Query:
    return p._words(v, pos, ("title",))


def _author(p: Parser, v: str, pos: int) -> tantivy.Query:
    return p._words(v, pos, ("author",))


def _path(p: Parser, v: str, pos: int) -> tantivy.Query:
    v = v.strip('"')
    if v.startswith(("/", "~")):
        folder = os.path.abspath(os.path.expanduser(v)).rstrip("/") or "/"
        return p._filter("folder", tantivy.Facet.from_string(folder))
    return p._words(v, pos, ("path",))


def _ext(p: Parser, v: str, pos: int) -> tantivy.Query:
    return p._filter("ext", v.lower().lstrip("."))


def _type(p: Parser, v: str, pos: int) -> tantivy.Query:
    mimes = TYPE_GROUPS.get(v.lower())
    if mimes is None:
        raise QueryError(f"unknown type {v!r} at position {pos}: use one of {', '.join(TYPE_GROUPS)}", pos)
    return tantivy.Query.term_set_query(p.schema, "mime", list(mimes))


def _source(p: Parser, v: str, pos: int) -> tantivy.Query:
    if v not in SOURCES:
        raise QueryError(f"source: at position {pos} is one of {', '.join(SOURCES)}, not {v!r}", pos)
    return p._filter("source", v)


def _dup(p: Parser, v: str, pos: int) -> tantivy.Query:
    if v not in ("yes", "no"):
        raise QueryError(f"dup: at position {pos} is yes or no, not {v!r}", pos)
    has = p.has_dup() if p.has_dup is not None else p._range("cluster", 1, None)
    return has if v == "yes" else tantivy.Query.boolean_query([(Occur.Must, tantivy.Query.all_query()),
                                                               (Occur.MustNot, has)])


def _size(p: Parser, v: str, pos: int) -> tantivy.Query:
    if ".." in v:
        a, b = v.split("..", 1)
        return p._range("size", _bytes(a, pos), _bytes(b, pos))
    m = _SIZE.match(v)
    if not m:
        raise QueryError(f"size at position {pos} must look like >10MB, <500k, 1MB..2MB", pos)
    n = _bytes(m.group(2) + (m.group(3) or ""), pos)
    op = m.group(1) or "="
    lo, hi = {">": (n + 1, None), ">=": (n, None), "<": (None, n - 1), "<=": (None, n), "=": (n, n)}[op]
    return p._range("size", lo, hi)


def _bytes(v: str, pos: int) -> int:
    m = _SIZE.match(v.strip())
    unit = (m.group(3) or "").lower() if m else None
    if not m or m.group(1) or unit not in _UNITS:
        raise QueryError(f"bad size {v!r} at position {pos}", pos)
    n = float(m.group(2)) * _UNITS[unit]
    if not n <= _BIGGEST:  # 1e400 is inf: no size is that large
        raise QueryError(f"size {v!r} at position {pos} is too large", pos)
    return int(n)


def _day(p: Parser, v: str, pos: int) -> tuple[dt.datetime, dt.datetime]:
    """The span of time a date word or date names, in local time."""
    today = p.now().replace(hour=0, minute=0, second=0, microsecond=0)
    words = {"today": (today, today + dt.timedelta(days=1)),
             "yesterday": (today - dt.timedelta(days=1), today),
             "lastweek": (today - dt.timedelta(days=7), today + dt.timedelta(days=1)),
             "lastmonth": (today - dt.timedelta(days=30), today + dt.timedelta(days=1)),
             "lastyear": (today - dt.timedelta(days=365), today + dt.timedelta(days=1))}
    if v.lower() in words:
        return words[v.lower()]
    for fmt, step in (("%Y-%m-%d", "day"), ("%Y-%m", "month"), ("%Y", "year")):
        try:
            start = dt.datetime.strptime(v, fmt)
        except ValueError:
            continue
        try:
            if step == "day":
                return start, start + dt.timedelta(days=1)
            if step == "month":
                return start, (start.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
            return start, start.replace(year=start.year + 1)
        except (OverflowError, ValueError):  # the end of 9999: past what datetime holds
            break
    raise QueryError(f"bad date {v!r} at position {pos}: use 2026-11-01, 2026-11, 2026, today, yesterday, "
                     "lastweek, lastmonth or lastyear", pos)


def _epoch(p: Parser, v: str, pos: int) -> int:
    """The start of the span ``v`` names, in seconds since the epoch."""
    start, _ = _day(p, v, pos)
    try:
        return int(start.timestamp())
    except (OverflowError, ValueError, OSError):  # year 1: local time before it cannot be told
        raise QueryError(f"date {v!r} at position {pos} is out of range", pos) from None


def _after(p: Parser, v: str, pos: int) -> tantivy.Query:
    # after:2026-11-01 means from that day on; after:lastweek, within the last week.
    return p._range("mtime", _epoch(p, v, pos), None)


def _before(p: Parser, v: str, pos: int) -> tantivy.Query:
    return p._range("mtime", None, _epoch(p, v, pos) - 1)


def cjk_query(schema: tantivy.Schema, run: str) -> tantivy.Query:
    """A run of CJK characters: a phrase of its bigrams (one character: itself)."""
    if len(run) == 1:
        return tantivy.Query.term_query(schema, "cjk1", run)
    grams: list[str | tuple[int, str]] = [run[i:i + 2] for i in range(len(run) - 1)]  # phrase_query's words
    return (tantivy.Query.term_query(schema, "cjk", grams[0]) if len(grams) == 1
            else tantivy.Query.phrase_query(schema, "cjk", grams))


FIELDS: dict[str, Callable[[Parser, str, int], tantivy.Query]] = {
    "title": _title, "author": _author, "path": _path, "in": _path, "ext": _ext, "type": _type,
    "after": _after, "before": _before, "size": _size, "dup": _dup, "source": _source, "lang": _lang,
}


def parse(schema: tantivy.Schema, query: str, now: Callable[[], dt.datetime] = dt.datetime.now,
          constant: bool = False, has_dup: Callable[[], tantivy.Query] | None = None,
          searcher: WordStats | None = None) -> tantivy.Query:
    return Parser(schema, query, now, constant, has_dup, searcher).parse()


def scored_terms(schema: tantivy.Schema, query: str) -> set[tuple[str, str]]:
    """(field, term) of every word statistic a search of ``query`` uses: the words it scores and
    those its LEVELLED fields are weighed by. Raises QueryError as ``parse``."""

    class Asked:
        num_docs = 1

        def doc_freq(self, field_name: str, field_value: str) -> int:
            asked.add((field_name, field_value))
            return 0

    asked: set[tuple[str, str]] = set()
    p = Parser(schema, query, searcher=Asked(), has_dup=tantivy.Query.all_query)
    p.parse()
    return p.terms | asked
