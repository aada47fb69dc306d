"""Snippets: the passage of a hit's stored text that shows best why it matched, with the query's
words highlighted, at a cost that does not grow with the text's length.

The stored text (index/store.py) is tagged text, zstd-compressed. It is read as a stream, a
chunk at a time, and each query word the index says the text holds is looked for in the chunk by
the regex engine's literal search of its letters (in lower case, capitalized and in capitals;
accented forms in text with accents): C code, about a millisecond a million characters. Reading
stops as soon as one passage holds every word (or EXTRA chunks after each was seen), so a long
document whose words are near its start costs as much as a short one; a word first met far into
a long text costs the decompression and search up to there, at most MAX_READ characters a hit
and BUDGET a search. Only the places found (at most ``PER_TERM`` a word) are looked at in
Python: WINDOWS stretches of a few hundred characters of tagged text around them, freed of tags,
split into words and analyzed as the index analyzed them, so that what is
highlighted is what matched: stems (``documents`` for ``document``), a phrase only where its
words are adjacent, a prefix, a fuzzy word, and a Chinese, Japanese or Korean run as it stands
(the index knows those by character bigrams, index/fulltext.py). The passage shown is the one
holding the most distinct query words (a phrase counts once, whole), prose before code (``_prose``),
the earliest among equals:
one fragment, and a second when another passage holds words the first lacks.

Nothing here depends on any document but the hit itself: no word statistics of the index, so
the passage an enterprise-mode reader is shown cannot tell anything of others' documents
(docs/search.md, "Enterprise mode").
"""

from __future__ import annotations

import bisect
import codecs
import dataclasses
import functools
import html
import itertools
import logging
import re
import unicodedata
from dataclasses import dataclass
from typing import IO, AbstractSet, Iterator

from deskdex.converters import BLOCK_KINDS
from deskdex.errors import QueryError

from . import fulltext
from . import query as query_language

logger = logging.getLogger(__name__)

LENGTH = 200  # characters of a snippet of one fragment
SECOND = 120  # characters of each fragment when there are two
CHUNK = 1 << 16  # bytes of tagged text read and searched per step
PER_TERM = 16  # places kept per query word (each costs a window looked at word by word)
TRIES = 256  # places tried per query word (found by its letters but not its stem: `dependent`)
CONTEXT = 240  # characters of tagged text taken on each side of a place
WINDOWS = 3  # windows looked at word by word, at most
STARTS = 32  # matches of a window a fragment may start at
LEAD = 40  # characters of context shown before the first match of a fragment
# What one hit, and all the hits of one search, may read (characters of tagged text): past them a
# term first met further on is not looked for (the snippet shows what was found). Reading costs
# 30 to 60 ms a million characters on a busy machine (decompression, decoding, searches).
MAX_READ = 2_500_000
BUDGET = 3_000_000
EXTRA = 2  # chunks read past the one where every term was seen, for a passage holding them all
OVERLAP = 256  # characters of the previous chunk searched again (a phrase across two chunks)

_WORD = fulltext.WORD  # words as the index splits them: at a change of script too
LONG_SEGMENT = 4096  # characters of a stretch past which its matching words are found by a pattern of them
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")  # the same in ASCII text, where no other script can start one
_TAG = re.compile(r"<(/?)([A-Za-z]+)[^<>]*>")
_HEADER = re.compile(r"<doc\b[^>]*>\s*(?:<title>[^<]*</title>\s*|<meta\b[^>]*>[^<]*</meta>\s*)*")
_SPACES = re.compile(r"[^\S\n]+")
_NEWLINES = re.compile(r" ?\n[\s]*")
# A block's opening tag with its page (converters/tagged.py writes the attributes in this order):
# what the page of a hit is read from.
_PAGE_TAG = re.compile(r'<(?:%s)(?: level="\d+")?(?: boilerplate="1")? page="(\d{1,9})">' % "|".join(BLOCK_KINDS))
_PAGE_ATTR = ' page="'
LONGEST_TAG = 64  # characters of a block's opening tag, at most (the page's number at most 9 digits)
# Between two words of a phrase: anything but a letter: tags and entities (`&gt;`) included.
_PHRASE_GAP = r"(?:[^\w<&]|_|<[^<>]*>|&#?\w+;|&)+"


def _accented() -> dict[str, str]:
    """A character class for each lower-case ASCII letter: itself, its capital and the accented
    letters ascii_fold takes to either (a class, not re.IGNORECASE, which is slower still)."""
    forms: dict[str, str] = {chr(c): chr(c) + chr(c).upper() for c in range(ord("a"), ord("z") + 1)}
    for code in range(0xC0, 0x250):
        c = chr(code)
        base = unicodedata.normalize("NFKD", c)[0]
        if base.isascii() and base.isalpha() and base != c:
            forms[base.lower()] += c
    return {b: f"[{letters}]" for b, letters in forms.items()}


_ACCENTED = _accented()
_ACCENT = re.compile("[\u00c0-\u024f]")


def _cases(needle: str) -> list[str]:
    """``needle`` as a word may be written: in lower case, capitalized, in capitals."""
    return list(dict.fromkeys((needle, needle.capitalize(), needle.upper())))


def _fold(text: str) -> str:
    """Lower-cased and without accents, as the index's ascii_fold (for the letters that have one)."""
    return "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))


@dataclass(frozen=True)
class Term:
    """One thing to highlight: ``kind`` word (``keys``: its stem), phrase (the stems in order),
    prefix (the folded letters), fuzzy (the stem; ``distance``) or cjk (the run itself);
    ``needles``: lower-cased letters every place it matches holds (a phrase: each word's, in order)."""

    kind: str
    keys: tuple[str, ...]
    needles: tuple[str, ...]
    distance: int = 0


def terms_of(query: str, lang: str | None = None) -> list[Term]:
    """The terms of ``query`` a snippet shows: the words searched for in the text, not those of a
    field filter (``title:``, ``ext:`` …) nor those negated (``-draft``, ``NOT (a b)``); stemmed
    as a text in ``lang`` is (index/fulltext.py). The terms of one query in every language are
    as many, in the same order: the ``k``-th is the same word of the query."""
    try:
        toks = query_language.tokenize(query)
    except QueryError:
        return []
    out: list[tuple[list[Term], list[Term]]] = []  # each word's terms in English and in ``lang``
    i, depth_skip = 0, 0
    while i < len(toks):
        text = toks[i].text
        i += 1
        if depth_skip:  # inside a negated group
            depth_skip += {"(": 1, ")": -1}.get(text, 0)
            continue
        if text in ("(", ")", "OR", "AND"):
            continue
        if text == "NOT" or (text.startswith("-") and len(text) > 1):
            nxt = toks[i].text if text == "NOT" and i < len(toks) else ""
            if nxt == "(":
                depth_skip = 1
            i += 1 if text == "NOT" else 0
            continue
        if text.startswith("+") and len(text) > 1:
            text = text[1:]
        m = re.match(r"^([a-z]+):(.*)$", text, re.S)
        if m and m.group(1) in query_language.FIELDS:
            if not m.group(2) and i < len(toks) and toks[i].text.startswith('"'):
                i += 1
            continue
        out.append((_terms_of_word(text, None), _terms_of_word(text, lang)))
    # A term repeated in English stems (``document documents``) is one, in every language alike.
    english: list[Term] = []
    unique: list[Term] = []
    for en, mine in out:
        for t, t_mine in zip(en, mine):
            if t not in english:
                english.append(t)
                unique.append(t_mine)
    return unique


def _terms_of_word(text: str, lang: str | None) -> list[Term]:
    """The terms of one word of the query as index/query.py reads it."""
    if text.startswith('"'):
        return _phrase(text.strip('"'), lang)
    if text.endswith("*") and len(text) > 1:
        forms = fulltext.analyze_path(text[:-1])
        return [Term("prefix", (forms[0],), (forms[0],))] if len(forms) == 1 else []
    fuzzy = re.match(r"^(.+)~([12]?)$", text)
    if fuzzy:
        stems = fulltext.analyze(fuzzy.group(1), lang)
        if len(stems) != 1:
            return []
        # Any word within the distance shares a part of the stem: its first or its second half.
        half = max(1, len(stems[0]) // 2)
        return [Term("fuzzy", (stems[0],), (stems[0][:half], stems[0][half:]), int(fuzzy.group(2) or 1))]
    return _phrase(text, lang)


def _phrase(text: str, lang: str | None) -> list[Term]:
    """A word or a phrase: its CJK runs apart, its other words stemmed; several words make a
    phrase, as a word with a hyphen does (``cherry-pick``)."""
    terms = [Term("cjk", (run,), (run.lower(),)) for run in fulltext.CJK.findall(text)]
    words = [w for w in _WORD.findall(fulltext.CJK.sub(" ", text)) if fulltext.analyze(w, lang)]
    stems = [fulltext.analyze(w, lang)[0] for w in words]
    if len(stems) == 1:
        terms.append(Term("word", (stems[0],), _needles(words[0], stems[0])))
    elif stems:
        # Found whole: each word's letters, anything but letters between them.
        terms.append(Term("phrase", tuple(stems), tuple(_needles(w, s)[-1] for w, s in zip(words, stems))))
    return terms


def _needles(word: str, stem: str) -> tuple[str, ...]:
    """The letters a word of the text that stems to ``stem`` starts with: those it shares with
    the query's word (a stem may end otherwise: ``happi`` for ``happy``), as typed and folded."""
    out: list[str] = []
    for form in (word.lower(), _fold(word)):
        n = 0
        while n < min(len(form), len(stem)) and form[n] == stem[n]:
            n += 1
        needle = form[:max(n, 1)]
        if needle not in out:
            out.append(needle)
    return tuple(out)


@dataclass
class Work:
    """What snippets cost, counted (tests check it grows with the matches, not the text):
    ``read`` characters of tagged text decompressed and searched in C, ``looked`` characters
    split into words and analyzed in Python, ``places`` found."""

    read: int = 0
    looked: int = 0
    places: int = 0


@dataclass
class _Match:
    start: int
    end: int
    term: int


@dataclass(frozen=True)
class Snippet:
    """A hit's snippet: its ``text``, the character ranges of its highlights (``spans``) and, for a
    paged document, the ``page`` its first highlight is on (its start's when it has none)."""

    text: str
    spans: list[list[int]]
    page: int | None = None


@dataclass
class _Fragment:
    text: str
    spans: list[list[int]]
    terms: frozenset[int]
    count: int
    where: int  # its place in the document (for ties: the earliest)
    # Where its first match is: ``first`` characters into the plain text of the window's tagged
    # text ``tagged`` (which starts at ``at`` in the document): its page is found from them.
    tagged: str = ""
    at: int = 0
    first: int = 0

    @functools.cached_property
    def rank(self) -> tuple[int, bool, int, int]:
        # Among passages holding as many of the query's words, prose before code: a wall of
        # identifiers tells a reader less about the page than a sentence using the same word.
        return (len(self.terms), _prose(self.text), min(self.count, 8), -self.where)


_CODE_MARKS = re.compile(r"[_=;{}()\[\]<>/\\|&$#@*]|\.\w|::|->")
PROSE_MARKS = 0.06  # code marks per character above which a passage reads as code (prose: ~0.01)


def _prose(text: str) -> bool:
    return len(_CODE_MARKS.findall(text)) <= PROSE_MARKS * max(1, len(text))


class _Language:
    """A query's terms stemmed for texts in one language, with what finds their places."""

    def __init__(self, lang: str | None, terms: list[Term]) -> None:
        self.lang = lang
        self.terms = terms
        self.finders = [_finder(t, accents=False) for t in terms]
        # The words a window's words are analyzed for: those that start like a needle (a fuzzy
        # word may differ anywhere: with one, all are).
        fuzzy = any(t.kind == "fuzzy" for t in terms)
        needles = sorted({_fold(n) for t in terms if t.kind != "cjk" for n in t.needles}, key=len)
        self.candidate = None if fuzzy or not needles else \
            re.compile("|".join(re.escape(n) for n in reversed(needles)), re.IGNORECASE)
        self.stems: dict[str, str | None] = {}


class Snippets:
    """The snippets of one query: ``make(stream)`` for each hit's stored text."""

    def __init__(self, query: str) -> None:
        self.query = query
        self._languages: dict[str | None, _Language] = {}
        self._a = self._language(None)
        self.terms = self._a.terms  # in English stems: the index's ``body`` (index/search.py)
        self._paths: dict[str, str | None] = {}
        self._distances: dict[tuple[str, str], int] = {}
        self.work = Work()

    def _language(self, lang: str | None) -> "_Language":
        """The terms of the query and what finds them, for a text in ``lang`` (the same for
        every language without a stemmer of its own)."""
        key = lang if lang in fulltext.STEMMED else None
        if key not in self._languages:
            self._languages[key] = _Language(key, terms_of(self.query, key))
        return self._languages[key]

    def terms_for(self, lang: str | None) -> list[Term]:
        """``terms`` as the body of a text in ``lang`` holds them (the same indexes)."""
        return self._language(lang).terms

    # -- one hit ----------------------------------------------------------------------------
    def make(self, stream: IO[bytes] | None, present: AbstractSet[int] | None = None,
             lang: str | None = None) -> tuple[str, list[list[int]]]:
        """The snippet of the stored text ``stream`` and the character ranges of its highlights
        (``snippet`` without the page)."""
        made = self.snippet(stream, present, lang)
        return made.text, made.spans

    def snippet(self, stream: IO[bytes] | None, present: AbstractSet[int] | None = None,
                lang: str | None = None) -> Snippet:
        """The snippet of the stored text ``stream`` (tagged text, read as far as needed), the
        character ranges of its highlights and its page. ``present``: the indexes (in ``terms``) of
        the terms the index says the text holds (None: all may); the others are not looked for, so
        a word that matched the title alone costs no reading of the whole text."""
        if stream is None:
            return Snippet("", [])
        self._a = self._language(lang)  # the text's words are stemmed as its language's (``lang``)
        text = _Text(stream, self.work)
        wanted = [k for k in range(len(self._a.terms)) if present is None or k in present]
        places = self._places(text, wanted) if wanted else []
        windows = self._windows(places)
        frags = [f for a, b in windows if (f := self._best(text, a, b)) is not None]
        if not frags:
            start = self._start(text)
            return Snippet(start, [], text.first_page() if start else None)
        frags.sort(key=lambda f: f.rank, reverse=True)
        first = frags[0]
        second = next((f for f in frags[1:] if f.terms - first.terms), None)
        if second is None:
            return Snippet(first.text, first.spans, _page(text, first))
        a, b = sorted((first, second), key=lambda f: f.where)
        page = _page(text, a)  # the first highlight is ``a``'s first match: _shorten keeps it
        a, b = self._shorten(a), self._shorten(b)
        sep = " … "
        return Snippet(a.text + sep + b.text, a.spans + [[s + len(a.text) + len(sep), e + len(a.text) + len(sep)]
                                                         for s, e in b.spans], page)

    def marks(self, text: str, lang: str | None = None) -> list[list[int]]:
        """The [start, end) character ranges of the plain ``text`` (one block of a document, in
        ``lang``) where the query's terms match, found as a snippet's highlights are. Overlapping
        ranges are merged."""
        return self.marks_of([text], lang)[0]

    def marks_of(self, texts: list[str], lang: str | None = None) -> list[list[list[int]]]:
        """``marks`` of each of ``texts`` (the blocks of a document, in ``lang``): what the document
        op marks a preview's hits with. The blocks are looked at as one text, searched in C for
        the words that may match (a phrase never across two blocks): only those, and the words a
        phrase needs after them, are split and analyzed in Python."""
        self._a = self._language(lang)
        out: list[list[list[int]]] = [[] for _ in texts]
        if not self._a.terms or not texts:
            return out
        whole = "\n".join(texts)  # no word holds a newline: words are the blocks' own
        may = self._a.candidate
        if may is not None and all(t.kind != "cjk" for t in self._a.terms) and may.search(whole) is None \
                and whole.isascii():
            return out  # no word of the text starts like a query word: one regex search in C
        starts = list(itertools.accumulate((len(t) + 1 for t in texts[:-1]), initial=0))
        for m in self._matches(whole, starts):
            i = bisect.bisect_right(starts, m.start) - 1
            marks, base = out[i], starts[i]
            if marks and m.start - base < marks[-1][1]:
                marks[-1][1] = max(marks[-1][1], m.end - base)
            else:
                marks.append([m.start - base, m.end - base])
        return out

    def _places(self, text: _Text, wanted: list[int]) -> list[tuple[int, int]]:
        """(position, term) of the places of the ``wanted`` terms, reading until one passage
        holds them all, each has its fill of places, or EXTRA chunks after the one where the
        last of them was first seen (all are in the text, but never together), or the end."""
        found: list[list[int]] = [[] for _ in self._a.terms]
        tries = [0 if k in wanted else TRIES for k in range(len(self._a.terms))]
        extra = -1  # chunks read since every wanted term was seen
        for start, chunk in text.chunks():
            begin = max(0, text.header - start)
            # Text in a language with accents (a few in its first lines): also their accented forms.
            accents = len(_ACCENT.findall(chunk, begin, begin + 4096)) >= 4
            for k in range(len(self._a.terms)):
                if len(found[k]) >= PER_TERM or tries[k] >= TRIES:
                    continue
                before = len(found[k])
                self._look(chunk, start, begin, k, self._a.finders[k], found, tries)
                if accents and len(found[k]) == before and _finder(self._a.terms[k], accents=True):
                    self._look(chunk, start, begin, k, _finder(self._a.terms[k], accents=True), found, tries)
            seen = [found[k] for k in wanted]
            if extra >= 0 or all(seen):
                extra += 1
            if _complete(seen) or extra >= EXTRA or all(len(f) >= PER_TERM or t >= TRIES
                                                        for f, t in zip(found, tries)):
                break
            if start + len(chunk) >= MAX_READ or self.work.read >= BUDGET:
                break  # the rest shows what was found so far
        # A word the index says is there but not found as written: an accented form in a text
        # with few (`Café` for `cafe`), looked for again in what was read.
        for k in wanted:
            if not found[k] and _finder(self._a.terms[k], accents=True):
                for start, part in text.parts():
                    if _ACCENT.search(part):
                        self._look(part, start, max(0, text.header - start), k,
                                   _finder(self._a.terms[k], accents=True), found, tries)
        places = sorted((pos, k) for k, f in enumerate(found) for pos in f)
        self.work.places += len(places)
        return places

    def _look(self, chunk: str, start: int, begin: int, k: int, finders: list[re.Pattern[str]],
              found: list[list[int]], tries: list[int]) -> None:
        """Add to ``found[k]`` the places ``finders`` find in ``chunk`` (at ``start`` in the text),
        as far as the term's fill of places and tries go."""
        places = set(found[k])
        hits = sorted((m for f in finders for m in itertools.islice(f.finditer(chunk, begin), TRIES)),
                      key=lambda m: m.start())
        for m in hits:
            pos = start + m.start()
            if pos in places:
                continue  # in the overlap with the chunk before, seen already
            tries[k] += 1
            if self._plausible(self._a.terms[k], chunk, m):
                found[k].append(pos)
                places.add(pos)
                if len(found[k]) >= PER_TERM:
                    break
            if tries[k] >= TRIES:
                break
        found[k].sort()

    def _plausible(self, term: Term, chunk: str, m: re.Match[str]) -> bool:
        """Whether the word found at ``m`` is one of ``term``'s (a stem, not just its letters)."""
        if term.kind == "word":
            w = _WORD.match(chunk, m.start())
            return w is not None and self._stem(w.group()) == term.keys[0]
        if term.kind == "fuzzy":  # a half of the stem, anywhere in a word: the whole word's stem
            start = m.start()
            while start > 0 and chunk[start - 1].isalnum():
                start -= 1
            w = _WORD.match(chunk, start)
            stem = self._stem(w.group()) if w is not None else None
            return stem is not None and self._near(stem, term)
        return True  # a phrase is checked whole by its pattern, a prefix or CJK run needs no more

    @staticmethod
    def _windows(places: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Stretches of tagged text to look at word by word: around the places whose neighbourhood
        holds the most distinct terms (ties: the earliest), merged where they overlap."""
        scored = []
        for i, (pos, _) in enumerate(places):
            near = {k for p, k in places[max(0, i - 64):i + 64] if abs(p - pos) <= LENGTH}
            scored.append((-len(near), pos))
        scored.sort()
        chosen: list[int] = []
        for _, pos in scored:
            if all(abs(pos - c) > CONTEXT for c in chosen):
                chosen.append(pos)
            if len(chosen) >= WINDOWS:
                break
        spans: list[list[int]] = []
        for pos in sorted(chosen):
            a, b = max(0, pos - CONTEXT), pos + CONTEXT
            if spans and a <= spans[-1][1]:
                spans[-1][1] = b
            else:
                spans.append([a, b])
        return [(a, b) for a, b in spans]

    # -- one window ------------------------------------------------------------------------
    def _best(self, text: _Text, a: int, b: int) -> _Fragment | None:
        """The best fragment of the tagged text ``[a, b)``, or None when no term matches there."""
        at = max(a, text.header)
        tagged = text.slice(at, b)
        plain = _plain(tagged)
        self.work.looked += len(plain)
        matches = self._matches(plain)
        if not matches:
            return None
        best: _Fragment | None = None
        for i, m in enumerate(matches[:STARTS]):
            if i and m.start < matches[i - 1].end + LEAD:
                continue  # a fragment starting at the match before holds this one too
            start = _fragment_start(plain, m.start)
            end = _fragment_end(plain, start, max(m.end, start + LENGTH))
            inside = list(itertools.takewhile(lambda x: x.start < end, matches[i:]))  # noqa: B023 (used at once)
            inside = [x for x in inside if x.end <= end]
            frag = _Fragment(plain[start:end].replace("\n", " "), [[x.start - start, x.end - start] for x in inside],
                             frozenset(x.term for x in inside), len(inside), a + m.start, tagged, at, m.start)
            if best is None or frag.rank > best.rank:
                best = frag
        return best

    def _matches(self, plain: str, blocks: list[int] | None = None) -> list[_Match]:
        """Where the terms match in ``plain`` (text without tags), as the index would match them.
        ``blocks``: where each block of ``plain`` starts (the first at 0), which neither a phrase
        nor a CJK run is matched across (None: one text)."""
        starts = blocks or [0]
        out: list[_Match] = []
        for k, term in enumerate(self._a.terms):
            if term.kind == "cjk":
                out += self._cjk(plain, starts, term.needles[0], k)
        if any(t.kind != "cjk" for t in self._a.terms):
            for a, b in self._segments(plain, starts):
                out += self._matches_in(plain, a, b)
                if blocks is not None:  # a document's blocks (a snippet's window is counted whole)
                    self.work.looked += b - a
        out.sort(key=lambda m: (m.start, m.term))
        return out

    def _segments(self, plain: str, starts: list[int]) -> list[tuple[int, int]]:
        """The stretches of ``plain`` (each within a block, starting and ending at a word's edge)
        that hold every word which may match a term, and the words after it a phrase needs: in a
        block of ASCII text, only around the words the candidate pattern finds the start of (in C),
        so that a long text a query touches here and there is not split into words in Python."""
        may = self._a.candidate
        ends = [*(s - 1 for s in starts[1:]), len(plain)]
        if may is None:  # a fuzzy term: any word may match
            if all(t.kind != "phrase" for t in self._a.terms):
                return [(0, len(plain))]  # one text: no match spans two blocks but a phrase's
            return list(zip(starts, ends))
        span = max((len(t.keys) for t in self._a.terms if t.kind == "phrase"), default=1)
        hits: list[int] = []  # every place a needle starts, overlapping ones too
        m = may.search(plain)
        while m is not None:
            hits.append(m.start())
            m = may.search(plain, m.start() + 1)
        ascii_text = plain.isascii()
        out: list[tuple[int, int]] = []
        j = 0
        for a, b in zip(starts, ends):
            k = bisect.bisect_left(hits, a, j)
            j = bisect.bisect_left(hits, b, k)
            if ascii_text or plain[a:b].isascii():
                # ASCII words are runs of letters and digits: a word starts where one follows another character.
                for p in hits[k:j]:
                    if p > a and plain[p - 1].isalnum():
                        continue
                    q = p
                    for w in itertools.islice(_ASCII_WORD.finditer(plain, p, b), span):
                        q = w.end()
                    if out and p <= out[-1][1]:
                        out[-1] = (out[-1][0], max(out[-1][1], q))
                    elif q > p:
                        out.append((p, q))
            elif k < j or may.search(_fold(plain[a:b])) is not None:
                out.append((a, b))  # words of other scripts: the block, split as the index splits it
        return out

    def _matches_in(self, plain: str, a: int, b: int) -> list[_Match]:
        """The matches of the terms but CJK runs in ``plain[a:b]``, which starts and ends at a word's edge."""
        split = _ASCII_WORD if plain[a:b].isascii() else _WORD
        if b - a > LONG_SEGMENT and all(t.kind != "phrase" for t in self._a.terms):
            return self._matches_long(plain, a, b, split)
        words = [(w.start(), w.end(), w.group()) for w in split.finditer(plain, a, b)]
        may = self._a.candidate
        stems = [self._stem(w) if may is None or may.match(w) or (not w.isascii() and may.match(_fold(w))) else None
                 for _, _, w in words]
        out: list[_Match] = []
        for k, term in enumerate(self._a.terms):
            if term.kind == "word":
                out += [_Match(s, e, k) for (s, e, _), st in zip(words, stems) if st == term.keys[0]]
            elif term.kind == "phrase":
                n = len(term.keys)
                for i in range(len(words) - n + 1):
                    if tuple(stems[i:i + n]) == term.keys:
                        out += [_Match(words[j][0], words[j][1], k) for j in range(i, i + n)]
            elif term.kind == "prefix":
                out += [_Match(s, e, k) for (s, e, w), st in zip(words, stems)
                        if st is not None and (p := self._path(w)) and p.startswith(term.keys[0])]
            elif term.kind == "fuzzy":
                out += [_Match(s, e, k) for (s, e, _), st in zip(words, stems) if st and self._near(st, term)]
        return out

    def _matches_long(self, plain: str, a: int, b: int, split: re.Pattern[str]) -> list[_Match]:
        """``_matches_in`` of a long stretch without phrases (a fuzzy word's whole document): each
        distinct word analyzed once, and the places of those that match found in C (in ASCII text
        by a pattern of them, a word whole), not every word's in Python."""
        may = self._a.candidate
        stems = {w: self._stem(w) if may is None or may.match(w) or (not w.isascii() and may.match(_fold(w))) else None
                 for w in set(split.findall(plain, a, b))}
        good: list[set[str]] = []
        for term in self._a.terms:
            if term.kind == "word":
                good.append({w for w, st in stems.items() if st == term.keys[0]})
            elif term.kind == "prefix":
                good.append({w for w, st in stems.items()
                             if st is not None and (p := self._path(w)) and p.startswith(term.keys[0])})
            elif term.kind == "fuzzy":
                good.append({w for w, st in stems.items() if st and self._near(st, term)})
            else:
                good.append(set())
        matching = set().union(*good)
        if not matching:
            return []
        if split is _ASCII_WORD:
            alternatives = "|".join(re.escape(w) for w in sorted(matching, key=len, reverse=True))
            found = re.compile(f"(?<![A-Za-z0-9])(?:{alternatives})(?![A-Za-z0-9])").finditer(plain, a, b)
        else:
            found = (w for w in split.finditer(plain, a, b) if w.group() in matching)
        return [_Match(m.start(), m.end(), k) for m in found for k, g in enumerate(good) if m.group() in g]

    @staticmethod
    def _cjk(plain: str, blocks: list[int], run: str, k: int) -> list[_Match]:
        """Where the CJK ``run`` stands in each block of ``plain`` (in lower case, as it is indexed)."""
        out: list[_Match] = []
        if run not in plain.lower():
            return out
        for a, b in zip(blocks, [*blocks[1:], len(plain) + 1]):
            low = plain[a:b - 1 if b <= len(plain) else b].lower()
            at = low.find(run)
            while at != -1:
                out.append(_Match(a + at, a + at + len(run), k))
                at = low.find(run, at + len(run))
        return out

    def _stem(self, word: str) -> str | None:
        if word not in self._a.stems:
            forms = fulltext.analyze(word, self._a.lang)
            self._a.stems[word] = forms[0] if len(forms) == 1 else None
        return self._a.stems[word]

    def _near(self, stem: str, term: Term) -> bool:
        """Whether ``stem`` is within a fuzzy ``term``'s distance of it."""
        key = term.keys[0]
        if abs(len(stem) - len(key)) > term.distance:
            return False
        if (stem, key) not in self._distances:
            self._distances[stem, key] = _distance(stem, key)
        return self._distances[stem, key] <= term.distance

    def _path(self, word: str) -> str | None:
        if word not in self._paths:
            forms = fulltext.analyze_path(word)
            self._paths[word] = forms[0] if len(forms) == 1 else None
        return self._paths[word]

    def _start(self, text: _Text) -> str:
        """No term in the text (it matched by its title, path or a filter): its first words."""
        plain = _plain(text.slice(text.header, text.header + 4 * LENGTH))
        self.work.looked += len(plain)
        plain = plain.strip().replace("\n", " ")
        return plain[:_fragment_end(plain, 0, LENGTH)] if len(plain) > LENGTH else plain

    @staticmethod
    def _shorten(f: _Fragment) -> _Fragment:
        """``f`` cut to SECOND characters, keeping its first match."""
        if len(f.text) <= SECOND:
            return f
        first = min((s for s, _ in f.spans), default=0)
        start = 0 if first < SECOND // 2 else _fragment_start(f.text, first)
        end = _fragment_end(f.text, start, max(start + SECOND, min((e for s, e in f.spans if s >= start),
                                                                     default=start)))
        spans = [[s - start, e - start] for s, e in f.spans if s >= start and e <= end]
        return dataclasses.replace(f, text=f.text[start:end], spans=spans)


@functools.lru_cache(maxsize=1024)
def _finder(term: Term, accents: bool) -> list[re.Pattern[str]]:
    """What finds the places of ``term`` in tagged text: its needles at the start of a word
    (CJK: anywhere), a phrase whole. Without ``accents``, patterns that start with a literal
    (the needle in lower case, capitalized and in capitals), which the regex engine looks for
    as fast as str.find (lower-casing the text would cost ten times more); with, one pattern
    whose letters also match their accented forms (``cafe`` finds ``Café``), several times
    slower: for text that has such letters and where the literal ones found nothing. Kept
    between searches (a daemon compiles a word's patterns once)."""
    def letters(needle: str) -> str:
        return "".join(_ACCENTED.get(c, re.escape(c)) for c in needle) if accents else re.escape(needle)

    def at_word_start(needle: str) -> str:  # the letter before it, if any, is not a letter
        return f"{letters(needle)}(?<![^\\W_][\\s\\S]{{{len(needle)}}})"

    if term.kind == "cjk":
        return [] if accents else [re.compile(re.escape(term.needles[0]))]
    if term.kind == "phrase":
        first, rest = term.needles[0], "".join(_PHRASE_GAP + letters(n) + r"[^\W_]*" for n in term.needles[1:])
        if accents:
            return [re.compile(at_word_start(first) + r"[^\W_]*" + rest)]
        return [re.compile(at_word_start(form) + f"(?i:[^\\W_]*{rest})") for form in _cases(first)]
    needles = term.needles
    if accents:
        return [re.compile("|".join(letters(n) if term.kind == "fuzzy" else at_word_start(n) for n in needles))]
    return [re.compile(letters(form) if term.kind == "fuzzy" else at_word_start(form))
            for n in needles for form in _cases(n)]


class _Text:
    """The tagged text of one hit, decompressed chunk by chunk as the search for places goes on;
    what was read stays, for the windows."""

    def __init__(self, stream: IO[bytes], work: Work) -> None:
        self._stream = stream
        self._work = work
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._parts: list[str] = []
        self._starts: list[int] = []
        self._length = 0
        self._done = False
        self.header = 0  # where the body starts: after <doc>, <title> and <meta>
        self._more()
        if self._parts:
            m = _HEADER.match(self._parts[0])
            self.header = m.end() if m else 0
        # A paged document's blocks each carry their page: its first block does. Any other text
        # costs one literal search of its first chunk and is never looked at for pages again.
        head = self._parts[0] if self._parts else ""
        self.paged = _PAGE_ATTR in head and _PAGE_TAG.search(head, self.header) is not None

    def first_page(self) -> int | None:
        """The page of the text's first block (a snippet of its start)."""
        if not self.paged:
            return None
        m = _PAGE_TAG.search(self._parts[0], self.header)
        return int(m.group(1)) if m else None

    def page_before(self, pos: int) -> int | None:
        """The page of the last block whose opening tag starts before ``pos`` (None: no page
        there), looked for backwards from ``pos`` (in what was read already): a page's first
        block is seldom more than a few hundred characters back."""
        if not self.paged:
            return None
        end, step = min(pos, self._length), 4096
        while end > self.header:
            lo = max(self.header, end - step)
            # The tag may straddle ``end``: take the longest one past it, and keep those starting before.
            piece = self.slice(lo, min(end + LONGEST_TAG, self._length))
            at = piece.rfind(_PAGE_ATTR, 0, end - lo + LONGEST_TAG)
            while at != -1:
                lt = piece.rfind("<", 0, at)
                m = _PAGE_TAG.match(piece, lt) if lt != -1 else None
                if m is not None and m.end() > at and lo + lt < pos:
                    return int(m.group(1))
                if lt == -1 and lo > self.header:
                    break  # its tag may start before ``lo``: the next piece back holds it whole
                at = piece.rfind(_PAGE_ATTR, 0, at)
            end, step = lo + LONGEST_TAG if lo > self.header else lo, step * 4
        return None

    def _more(self) -> bool:
        if self._done:
            return False
        data = self._stream.read(CHUNK)
        part = self._decoder.decode(data, final=not data)
        if not data:
            self._done = True
        if part:
            self._starts.append(self._length)
            self._parts.append(part)
            self._length += len(part)
            self._work.read += len(part)
        return bool(part) or not self._done

    def chunks(self) -> Iterator[tuple[int, str]]:
        """(offset, text) of each chunk, with the end of the one before it (a phrase across them)."""
        i = 0
        while True:
            while i >= len(self._parts):
                if not self._more():
                    return
            start = self._starts[i]
            tail = self._parts[i - 1][-OVERLAP:] if i else ""
            yield start - len(tail), tail + self._parts[i]
            i += 1

    def parts(self) -> Iterator[tuple[int, str]]:
        """(offset, text) of each chunk read so far."""
        return zip(self._starts, self._parts)

    def slice(self, a: int, b: int) -> str:
        """Characters ``[a, b)`` (as far as the text goes), reading further if needed."""
        while self._length < b and self._more():
            pass
        out = []
        for start, part in zip(self._starts, self._parts):
            if start + len(part) > a and start < b:
                out.append(part[max(0, a - start):b - start])
        return "".join(out)


def _page(text: _Text, frag: _Fragment) -> int | None:
    """The page of ``frag``'s first match: the page of the window's start, or of the last block
    opening in the window before the match. A block's place in the plain text is that of the
    plain text of the tagged text before its tag (_plain keeps blocks on lines of their own), so
    only a block that changes the page costs that conversion (of a window: a few hundred characters)."""
    if not text.paged:
        return None
    page = text.page_before(frag.at)
    for m in _PAGE_TAG.finditer(frag.tagged):
        n = int(m.group(1))
        if n == page:
            continue
        if len(_plain(frag.tagged[:m.start()])) > frag.first:
            break
        page = n
    return page


def _complete(found: list[list[int]]) -> bool:
    """Whether one passage (LENGTH characters) holds a place of every term."""
    if not all(found):
        return False
    if len(found) == 1:
        return True
    events = sorted((p, k) for k, f in enumerate(found) for p in f)
    last: dict[int, int] = {}
    for p, k in events:
        last[k] = p
        if len(last) == len(found) and p - min(last.values()) <= LENGTH:
            return True
    return False


def _plain(tagged: str) -> str:
    """Tagged text (a slice of it: a tag or entity cut at either end is dropped) as plain text,
    blocks on lines of their own."""
    gt, lt = tagged.find(">"), tagged.find("<")
    if gt != -1 and (lt == -1 or gt < lt):
        tagged = tagged[gt + 1:]
    lt = tagged.rfind("<")
    if lt != -1 and tagged.find(">", lt) == -1:
        tagged = tagged[:lt]
    amp = tagged.rfind("&")
    if amp != -1 and ";" not in tagged[amp:]:
        tagged = tagged[:amp]
    text = _TAG.sub(lambda m: "\n" if m.group(2) in BLOCK_KINDS or m.group(2) in ("title", "meta") else "", tagged)
    text = html.unescape(text)
    return _NEWLINES.sub("\n", _SPACES.sub(" ", text))


def _fragment_start(plain: str, match: int) -> int:
    """Where a fragment whose first match starts at ``match`` begins: LEAD characters before it,
    at the start of a word, never before the start of the match's line (block)."""
    start = max(0, match - LEAD)
    line = plain.rfind("\n", start, match)
    if line != -1:
        return line + 1
    if start > 0 and plain[start - 1].isalnum():
        m = re.compile(r"[^\W_]*[\W_]*").match(plain, start)
        start = m.end() if m and m.end() <= match else start
    return start


def _fragment_end(plain: str, start: int, end: int) -> int:
    """``end`` moved back to the end of a word (not before ``start``)."""
    if end >= len(plain):
        return len(plain)
    cut = end
    while cut > start and plain[cut - 1].isalnum() and plain[cut].isalnum():
        cut -= 1
    return cut if cut > start else end


def _distance(a: str, b: str) -> int:
    """Levenshtein distance with transpositions counting one, as tantivy's fuzzy terms."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]

