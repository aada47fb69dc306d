"""A query as it is being typed: the last word, still unfinished, also matches as a prefix.

Search-as-you-type (the tray's search window) sends a query at each pause in typing. The word
at the end is usually cut short (``zep`` on the way to ``zephyr``), and the query language
(docs/search.md) matches whole words only, unless the word ends with ``*``. So the last word
``w`` is sent as ``(w OR w*)``: the word itself (stemmed, as always: ``running`` still finds
``run``, which the prefix of the unstemmed word would not) or any word starting with it.

Only a plain word the user is still typing is changed, and only where the prefix is one the
query language takes; everything else is sent as typed, so its errors and its meaning stay the
query language's own:

- nothing after a space (the word was ended), nor inside an open quote (a phrase being typed);
- not a phrase, a pattern (``word*``, ``word~``), an operator (``OR``), a parenthesis, nor a
  word excluded (``-w``, ``NOT w``: excluding every word that starts with it is not what
  someone half-way through typing it means);
- a filter only where it takes words (``title:``, ``author:``, ``path:``/``in:`` with a word,
  not a folder): ``(title:w OR title:w*)``; ``ext:``, ``after:`` and the others as typed;
- a word of one searchable term of at least two letters (what ``w*`` needs), no CJK (matched
  by bigrams, not by words), within the query's bounds (index/query.py).
"""

from __future__ import annotations

import re

from deskdex.protocol import MAX_QUERY

from . import fulltext
from .query import _TOKEN, MAX_PATTERN_LETTERS, MAX_PATTERNS

WORD_FILTERS = ("title", "author", "path", "in")  # filters whose value is words (path/in: unless a folder)
_FIELD = re.compile(r"^([a-z]+):(.+)$", re.S)
_PATTERN = re.compile(r"(\*|~[12]?)$")


def prefix_last_word(query: str) -> str:
    """``query`` with its last word also matched as a prefix, when it is a word being typed."""
    if not query or query[-1].isspace() or query.count('"') % 2:
        return query
    tokens = [m for m in _TOKEN.finditer(query) if not m.group(0).isspace()]
    if not tokens:
        return query
    last = tokens[-1]
    if last.end() != len(query) or len(tokens) > 1 and tokens[-2].group(0) == "NOT":
        return query
    if sum(1 for t in tokens if _PATTERN.search(t.group(0))) >= MAX_PATTERNS:
        return query  # one pattern more would be refused
    text = last.group(0)
    field = ""
    m = _FIELD.match(text)
    if m:
        field, text = m.group(1) + ":", m.group(2)
        if m.group(1) not in WORD_FILTERS or (m.group(1) in ("path", "in") and text.startswith(("/", "~"))):
            return query
    if not _prefixable(text):
        return query
    rewritten = f"{query[:last.start()]}({field}{text} OR {field}{text}*)"
    return rewritten if len(rewritten) <= MAX_QUERY else query


def _prefixable(word: str) -> bool:
    if word in ("OR", "AND", "NOT") or word.startswith(('"', "-", "+", "(", ")")) or _PATTERN.search(word):
        return False
    if len(word) > MAX_PATTERN_LETTERS or fulltext.CJK.search(word):
        return False
    terms = fulltext.analyze_path(word)
    return len(terms) == 1 and len(terms[0]) >= 2


_REWRITTEN = re.compile(r"\(([^\s():*~\"]+) OR \1\*\)$")


def as_typed(query: str) -> str:
    """``query`` as it was typed before ``prefix_last_word`` rewrote it (the last word alone): what
    meaning search embeds (index/meaning.py), which knows no prefixes."""
    m = _REWRITTEN.search(query)
    return query[:m.start()] + m.group(1) if m else query

