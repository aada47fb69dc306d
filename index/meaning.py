"""Documents found by meaning as well as by their words (docs/search.md, "Meaning").

Passages of each stored text (windows of ``PASSAGE_WORDS`` words, and the title with the file's name
as one more) are embedded with the static token vectors the ``wordllama`` wheel ships: a passage's
vector is the average of its tokens' vectors, normalised. Nothing is downloaded: the weights and the
tokenizer file are read from the installed wheel by path (its own loader looks for the tokenizer in
another folder, then fetches it from the network), the weights mapped from the file.

Vectors are kept in the catalog, one row per stored text (``meaning``: the text's checksum as 16 bytes,
so copies share one row, and its passages' vectors), each passage as ``KEPT`` signed bytes: the first
``KEPT`` of the model's 256 dimensions (it was trained so that a prefix of a vector is a vector of its
own), normalised, times 127. A row is a fifth the size of one with the 256 dimensions in float32, and
a search's cosine, a matrix product, is unchanged to within 1 % by the rounding. The rows have no index
of their own (the writer embeds a text only when the text store had no such text) and are numbered in
order of writing, never reusing a number; with a count of the times rows were dropped, kept in
``meta``, that tells a searcher whether the vectors it holds are the catalog's (``_version``).
Texts stored before meaning was on get their vectors afterwards, a batch at a time (``backfill``). A search
takes the documents whose best passage is nearest to the query and ranks those the words did not find
after the words' hits (``fuse``). Only plain queries of words are fused: a filter (``ext:``, ``after:``)
or an operator asks for what the words say, which meaning cannot honour.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any, Callable, Sequence

from deskdex.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    import tantivy

__all__ = ["Model", "MeaningVectors", "backfill", "backfill_done", "backfill_due", "drop_all", "fuse", "missing", "model", "near_hits", "plain_words"]

PASSAGE_WORDS = 150
# Passages of one text at most: the first ones. A long text's beginning says what it is about,
# and the store must stay small (docs/search.md, "Meaning": sizes measured).
MAX_PASSAGES = 8
# Characters of a text that its passages are taken from: 1,200 words of prose take 8,000. A writer
# joins no more of a document's blocks than this (Document.body_text's limit), and a text embedded
# again later from the store (``backfill``) is cut at the same place, so both give the same vectors.
TEXT_CHARS = 1 << 17
DIM = 256  # the model's dimensions
# Those kept: 128 found as much on the meaning set's train part as 256 (docs/benchmarks.md, "Meaning
# search") at half the store and half the work of summing a passage's token vectors.
KEPT = 128
SCALE = 127.0
CANDIDATES = 30  # documents by meaning after the words' (100: the same MRR on train, slower)
# Least cosine of a query and a document's best passage for the document to count as near: unrelated
# texts score about 0 to 0.15 with this model, a text on the query's subject 0.25 and more.
MIN_SIMILARITY = 0.2
# And at least this share of the nearest text's cosine: with this static model, loosely related texts
# reach 0.2 to 0.3 whatever the query ("plumber" and a garden plan, 0.27), so in a small collection
# the bar alone let them through. Measured on the test's notes: a text about the query scores 0.6 of
# the best or more ("cooking supper": the soup 0.40, the club dinner's minutes 0.30), a loose one
# less once something is truly near ("budget": the budget 0.86, the tax notice 0.27). On the corpus the
# 30 nearest all pass both bars: what the measured sets find is unchanged (docs/benchmarks.md).
RELATIVE = 0.6
CACHE_WORDS = 100_000  # distinct words whose token ids are kept, in two generations (about 12 MiB at most)
SHORTLIST = 1000  # passages nearest by their signs, whose exact cosine is computed

TABLE = "CREATE TABLE IF NOT EXISTS meaning(id INTEGER PRIMARY KEY AUTOINCREMENT, blob BLOB NOT NULL, vecs BLOB NOT NULL)"
BACKFILL_BATCH = 200  # texts embedded per committed batch of a backfill: a fraction of a second
_PLAIN = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*")
_OPERATORS = {"AND", "OR", "NOT"}
_DIGIT = re.compile(r"\d")
_LETTER = re.compile(r"[^\W\d_]")


def _files() -> tuple[str, str]:
    """The weights and tokenizer files inside the installed wordllama wheel."""
    import importlib.util

    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("meaning = true needs the wordllama package: pip install 'wordllama>=0.4.0.post1'")
    base = list(spec.submodule_search_locations)[0]
    return (os.path.join(base, "weights", "l2_supercat_256.safetensors"),
            os.path.join(base, "tokenizers", "l2_supercat_tokenizer_config.json"))


def _layout(path: str) -> tuple[tuple[int, int], int]:
    """The shape and data offset of the token table of a safetensors file, read from its header
    and checked against the file's size (without numpy: a run that embeds nothing loads none).
    The format: a little-endian u64 header length, the JSON header, then the data."""
    import json

    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        if not 2 <= n <= 1 << 20:
            raise ValueError(f"a header of {n} bytes: not a safetensors file")
        entry = json.loads(f.read(n))["embedding.weight"]
    if entry["dtype"] != "F16":
        raise ValueError(f"its vectors are {entry['dtype']}, not F16")
    shape = tuple(int(x) for x in entry["shape"])
    start, end = (int(x) for x in entry["data_offsets"])
    if len(shape) != 2 or end - start != shape[0] * shape[1] * 2 or 8 + n + end > os.path.getsize(path):
        raise ValueError("it is cut short or its header does not match its data")
    return (shape[0], shape[1]), 8 + n + start


def _mapped(path: str, shape: tuple[int, int], offset: int) -> np.ndarray[Any, Any]:
    """The token table, mapped from the file rather than read: a process holds only the pages of
    the tokens it meets (a search: a few), shared with every other process using it."""
    import numpy as np

    return np.memmap(path, dtype=np.float16, mode="r", offset=offset, shape=shape)


class Model:
    """The token vectors and tokenizer; ``embed`` gives unit vectors. Thread-safe."""

    def __init__(self, weights: str, tokenizer: str) -> None:
        # Checked here, loaded at first use: a missing or cut-short file is one clear error at start,
        # while a run that embeds nothing (`deskdex index` finding nothing changed) pays neither
        # numpy's import nor the tokenizer's 50 to 110 ms parse.
        for path in (weights, tokenizer):
            if not os.path.isfile(path):
                raise ConfigError(f"meaning = true: the model file {path} is missing: reinstall wordllama")
        try:
            self._shape, self._offset = _layout(weights)
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise ConfigError(f"meaning = true: cannot read the model file {weights}: {exc}") from None
        if self._shape[1] != DIM:
            raise ConfigError(f"meaning = true: the model file {weights} holds a {self._shape} table, "
                              f"not token vectors of {DIM} dimensions")
        self._weights, self._tokenizer_file = weights, tokenizer
        self._load_lock = threading.Lock()
        self._mapped_table: np.ndarray[Any, Any] | None = None
        self._tok: Any = None
        self._bpe: Any = None
        self._clip = False
        self._dense: np.ndarray[Any, Any] | None = None
        # Two generations of words: a word met again moves to the young one, and when that is full
        # the old one is dropped, so the words a collection repeats stay (clearing everything at once
        # tokenized every word of 10,000 notes again and again: 66,000 distinct words).
        # Tuples, not lists: the collector stops tracking a tuple of ints, so 100,000 cached words
        # cost its full collections nothing.
        self._young: dict[str, tuple[int, ...]] = {}
        self._old: dict[str, tuple[int, ...]] = {}
        self._cache_lock = threading.Lock()

    @property
    def _table(self) -> np.ndarray[Any, Any]:
        table = self._mapped_table
        if table is None:
            with self._load_lock:
                if self._mapped_table is None:
                    self._mapped_table = _mapped(self._weights, self._shape, self._offset)
                table = self._mapped_table
        return table

    def _tokenizer(self) -> Any:
        """The tokenizer, read from its file at the first word to learn (a ConfigError if it is damaged)."""
        if self._tok is not None:
            return self._tok
        with self._load_lock:
            if self._tok is None:
                from tokenizers import Tokenizer

                try:
                    tok = Tokenizer.from_file(self._tokenizer_file)
                except Exception as exc:  # the tokenizers library raises a bare Exception for a bad file
                    raise ConfigError(f"meaning = true: cannot read the tokenizer file {self._tokenizer_file}: "
                                      f"{exc}") from None
                tok.no_padding()
                tok.no_truncation()
                self._clip = tok.get_vocab_size() > self._shape[0]  # then the table's last stands in
                # The tokenizer's normalizer only puts "▁" before the text and for each space, and it
                # splits nothing before its BPE model: so a word's ids are the model's of "▁" + word.
                # Checked on words of several kinds; a tokenizer file that does otherwise is used whole.
                bpe = tok.model
                probe = ["Hello", "naïve", "co-operation,", "2024-12-06", "Ünïcödé", "日本語", "x"]
                if any(tok.encode(w, add_special_tokens=False).ids != [t.id for t in bpe.tokenize("▁" + w)]
                       for w in probe):
                    bpe = None
                self._bpe = bpe
                self._tok = tok
        return self._tok

    def _ids(self, words: list[str]) -> list[int]:
        """The token ids of a text's ``words``, word by word through a cache: the tokenizer marks each
        word's start (a space becomes "▁") and no token spans two words, so the ids are those of the
        whole text, at a tenth of the tokenizer's time on the words a collection repeats."""
        got = list(map(self._young.get, words))  # in C: most words are met again
        if None in got:
            with self._cache_lock:
                for i in [i for i, ids in enumerate(got) if ids is None]:
                    got[i] = self._learn(words[i])
        return list(chain.from_iterable(got))  # type: ignore[arg-type]  # no None is left

    def _learn(self, word: str) -> tuple[int, ...]:
        """A word's ids, from the old generation or the tokenizer, into the young one (the lock held)."""
        ids = self._old.get(word)
        if ids is None:
            tok = self._tokenizer()
            if self._bpe is not None:  # the tokenizer's own model, without its wrapping: half the time
                ids = tuple([t.id for t in self._bpe.tokenize("▁" + word)])
            else:
                ids = tuple(tok.encode(word, add_special_tokens=False).ids)
        if len(self._young) >= CACHE_WORDS // 2:
            self._old, self._young = self._young, {}
        self._young[word] = ids
        return ids

    def release_memory(self) -> None:
        """Drop what only a writer's many texts need (the table in memory, the words cached): an idle
        daemon keeps the tokenizer and the mapped file a search embeds its query with."""
        with self._cache_lock:
            self._dense = None
            self._young, self._old = {}, {}

    def _dense_table(self) -> np.ndarray[Any, Any]:
        """The kept dimensions of every token as float32 in memory (16 MiB), made once: summing
        a passage's rows from it takes a third of the time that from the mapped float16 file does.
        Read from the file, not through its mapping: the mapped pages would stay in the writer too,
        16 MiB more that only a query's few tokens need."""
        import numpy as np

        with self._cache_lock:
            if self._dense is None or self._dense.shape[1] != KEPT:
                rows, cols = self._shape
                with open(self._weights, "rb") as f:
                    f.seek(self._offset)
                    whole = np.fromfile(f, dtype=np.float16, count=rows * cols)
                if whole.size != rows * cols:
                    raise ConfigError(f"meaning = true: the model file {self._weights} was cut short")
                self._dense = np.ascontiguousarray(whole.reshape(rows, cols)[:, :KEPT], dtype=np.float32)
            return self._dense

    def embed(self, texts: Sequence[str], dense: bool = False) -> np.ndarray[Any, Any]:
        """Unit vectors of ``KEPT`` dimensions (float32, one row per text); a text with no tokens
        gives zeros. ``dense``: from the table in memory, for a writer's many texts; a query reads
        the few pages of its tokens from the mapped file instead."""
        import numpy as np

        kept = KEPT
        table = self._dense_table() if dense else self._table[:, :kept]
        out = np.zeros((len(texts), kept), dtype=np.float32)
        for i, text in enumerate(texts):
            v = self._sum(table, text.split())
            if v is None:
                continue
            norm = float(v @ v) ** 0.5  # np.linalg.norm costs five times as much on one short vector
            if norm > 0:
                out[i] = v / norm
        return out

    def _sum(self, table: np.ndarray[Any, Any], words: list[str]) -> np.ndarray[Any, Any] | None:
        """The sum of the rows of the tokens of ``words`` in ``table`` (float32), None for no tokens."""
        import numpy as np

        ids = self._ids(words)
        if not ids:
            return None
        if self._clip and max(ids) > table.shape[0] - 1:  # the tokenizer knows more tokens than the table
            ids = [min(t, table.shape[0] - 1) for t in ids]
        # take() and add.reduce() rather than table[ids].sum(): the same rows added in the same order,
        # a third less time on a note (the fancy index and sum()'s Python wrapper cost more than the sum).
        # Not on a query's mapped table, a strided view: take() copies the whole view first (0.85 ms
        # a query; the index, 4 microseconds).
        rows = table.take(ids, axis=0) if table.flags.c_contiguous else table[ids]
        return np.add.reduce(rows, axis=0, dtype=np.float32)  # type: ignore[no-any-return]

    def codes(self, texts: Sequence[list[str]]) -> bytes:
        """A writer's: the stored form of the vectors of ``texts`` (each as its words), ``KEPT`` signed
        bytes each (the unit vector times ``SCALE``, rounded), from the table in memory: ``embed``
        with ``dense`` rounded, in half the numpy calls (a few microseconds each, for every note)."""
        import numpy as np

        table = self._dense_table()
        out = []
        for words in texts:
            v = self._sum(table, words)
            norm = float(v @ v) ** 0.5 if v is not None else 0.0
            if v is None or norm == 0:
                out.append(bytes(KEPT))  # no tokens: zeros, as embed() gives
            else:
                out.append(np.rint(v * (SCALE / norm)).astype(np.int8).tobytes())
        return b"".join(out)


_model: Model | None = None
_model_lock = threading.Lock()


def model() -> Model:
    """The wheel's model, loaded once per process (a ConfigError names the file that is wrong)."""
    global _model
    with _model_lock:
        if _model is None:
            _model = Model(*_files())
        return _model


def passages(text: str, title: str, name: str) -> list[str]:
    """What one text is embedded as: its title and name, then its first passages of words; a text
    of one passage shares it with its title and name (half the store for a short note)."""
    return [" ".join(words) for words in _passage_words(text, title, name)]


def _passage_words(text: str, title: str, name: str) -> list[list[str]]:
    """``passages`` as lists of words: a writer embeds them so, without joining the words to split
    them again (a tenth of the time of embedding a note)."""
    words = _first_words(text, PASSAGE_WORDS * MAX_PASSAGES)
    head = f"{title} {name}".split()
    if len(words) <= PASSAGE_WORDS:
        return [p] if (p := head + words) else []
    out = [head] if head else []
    for i in range(0, min(len(words), PASSAGE_WORDS * MAX_PASSAGES), PASSAGE_WORDS):
        out.append(words[i:i + PASSAGE_WORDS])
    return out


def _first_words(text: str, n: int) -> list[str]:
    """All the words of ``text``'s first ``TEXT_CHARS`` characters (as ``text.split()``) up to the
    first ``n``: split from a prefix, not the whole text (all the words of a 5 MB text take 48 MiB
    of the writer's memory, to keep 1,200)."""
    text = text[:TEXT_CHARS]
    size = 16 * n
    while size < len(text):
        words = text[:size].split()
        if len(words) > n:  # a word begins after the n-th: those n are whole
            return words[:n]
        size *= 4
    return text.split()[:n]


def store(db: sqlite3.Connection, m: Model, blob: str, text: str, title: str, name: str) -> None:
    """Embed the passages of a text the text store has just taken (copies share them: the writer
    calls this only for a new text). A text without words gets a row without passages: every text
    a writer with meaning on takes has its row, so only a table made anew needs a ``backfill``."""
    db.execute("INSERT INTO meaning(blob, vecs) VALUES(?,?)",
               (bytes.fromhex(blob), m.codes(_passage_words(text, title, name))))


def create(db: sqlite3.Connection) -> None:
    """The table, made anew when an earlier release's (keyed by the checksum's text, 256 dimensions)
    or another width is found: its vectors cannot be searched with these, ``backfill`` makes them again."""
    if _has_table(db):
        columns = [r[1] for r in db.execute("PRAGMA table_info(meaning)")]
        width = db.execute("SELECT value FROM meta WHERE key='meaning_dims'").fetchone()
        if columns == ["id", "blob", "vecs"] and width is not None and width[0] == str(KEPT):
            return
        db.execute("DROP TABLE meaning")
        _dropped(db)  # the new table numbers its rows from 1 again
    db.execute(TABLE)
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('meaning_dims', ?)", (str(KEPT),))
    # The texts stored so far have no vectors: the next pass embeds them (``missing`` is a scan of
    # every document, 0.2 s on 11,500: not for every pass, only until a backfill has ended). A
    # catalog with no stored text yet has none to embed: every text a writer with meaning on takes
    # gets its row (``store``), so a new home never scans (0.06 s of a first pass of 10,000 notes).
    if db.execute("SELECT 1 FROM docs WHERE status='ok' AND blob IS NOT NULL LIMIT 1").fetchone() is not None:
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('meaning_backfill', '1')")


def backfill_due(db: sqlite3.Connection) -> bool:
    """Whether stored texts may lack vectors: the table was made anew and no backfill has ended since."""
    return db.execute("SELECT 1 FROM meta WHERE key='meaning_backfill'").fetchone() is not None


def backfill_done(db: sqlite3.Connection) -> None:
    db.execute("DELETE FROM meta WHERE key='meaning_backfill'")


def missing(db: sqlite3.Connection) -> list[tuple[str, str]]:
    """The stored texts that have no vectors (stored while meaning was off, or by a release that
    kept them otherwise), as (blob, file name) of one document holding each."""
    have = {bytes(b) for (b,) in db.execute("SELECT blob FROM meaning")}
    return [(blob, os.path.basename(path or uri or "")) for blob, path, uri in db.execute(
        "SELECT blob, min(path), min(uri) FROM docs WHERE status='ok' AND blob IS NOT NULL GROUP BY blob")
        if bytes.fromhex(blob) not in have]


def backfill(db: sqlite3.Connection, m: Model, read: Callable[[str], tuple[str, str] | None],
             texts: Sequence[tuple[str, str]]) -> None:
    """Vectors for ``texts`` (from ``missing``); ``read(blob)`` gives a text's (body, title), None
    when it cannot be read: that text gets a row without passages, so it is not read again."""
    for blob, name in texts:
        body, title = read(blob) or ("", "")
        store(db, m, blob, body, title, name)


def _version(db: sqlite3.Connection) -> tuple[int, int]:
    """(the last row's number, how many times rows were dropped): every change of the vectors
    changes one, and both are read without a scan (a count(*) read the whole table: 4 ms of each
    search on the corpus). Rows are numbered in order of writing and never renumbered."""
    last = db.execute("SELECT coalesce(max(id), 0) FROM meaning").fetchone()[0]
    dropped = db.execute("SELECT value FROM meta WHERE key='meaning_dropped'").fetchone()
    return int(last), int(dropped[0]) if dropped else 0


def _dropped(db: sqlite3.Connection) -> None:
    db.execute("INSERT INTO meta(key, value) VALUES('meaning_dropped', '1') "
               "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1")


def collect_garbage(db: sqlite3.Connection) -> int:
    """Drop the vectors of texts no document refers to any more (as the text store does its texts)."""
    if not _has_table(db):
        return 0
    n = db.execute("DELETE FROM meaning WHERE NOT EXISTS "
                   "(SELECT 1 FROM docs WHERE docs.blob = lower(hex(meaning.blob)))").rowcount
    if n:
        _dropped(db)
    return n


def _has_table(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meaning'").fetchone() is not None


def drop_all(db: sqlite3.Connection) -> None:
    """meaning = false: no vectors are kept (those of an earlier run with it on are dropped)."""
    if _has_table(db):
        db.execute("DROP TABLE meaning")
        _dropped(db)


def plain_words(query: str) -> bool:
    """A query of words alone: no field, filter, phrase, wildcard or operator, and no name made of
    letters and digits (``number20050``, ``cve-2023-1234``, ``x86_64``): such a name asks for itself,
    and the texts nearest its pieces ("number", "200") are no more related to it than any other."""
    tokens = query.split()
    return bool(tokens) and all(_PLAIN.fullmatch(t.strip(",;?!")) is not None and t not in _OPERATORS
                                and not (_DIGIT.search(t) and _LETTER.search(t)) for t in tokens)


@dataclass
class _Loaded:
    key: tuple[int, int]
    blobs: list[str]
    owner: Any  # np.ndarray: the text (index in blobs) of each passage
    rows: Any  # np.ndarray int8 (passages, KEPT)
    codes: Any  # np.ndarray uint64 (passages, KEPT // 64): the signs of rows, for the first cut


class MeaningVectors:
    """The catalog's vectors, held in memory as one int8 matrix and read again when the table changed."""

    def __init__(self) -> None:
        self._loaded: dict[str, _Loaded] = {}
        self._lock = threading.Lock()

    def _load(self, path: str, db: sqlite3.Connection) -> _Loaded | None:
        if not _has_table(db):  # meaning is off for this index: numpy is not even imported
            return None
        import numpy as np

        key = _version(db)
        with self._lock:
            have = self._loaded.get(path)
            if have is not None and have.key == key:
                return have
            # Into one array made to size: a list of the rows' bytes joined would hold them twice.
            dim = KEPT
            total = db.execute("SELECT coalesce(sum(length(vecs)), 0) FROM meaning WHERE id <= ?",
                               (key[0],)).fetchone()[0] // dim
            rows = np.empty((total, dim), dtype=np.int8)
            blobs: list[str] = []
            counts: list[int] = []
            at, cut = 0, False
            for blob, vecs in db.execute("SELECT blob, vecs FROM meaning WHERE id <= ?", (key[0],)):
                n = min(len(vecs) // dim, total - at)  # rows added since the count wait for the next load
                cut = cut or n < len(vecs) // dim
                rows[at:at + n] = np.frombuffer(vecs, dtype=np.int8, count=n * dim).reshape(n, dim)
                blobs.append(blob.hex())
                counts.append(n)
                at += n
            rows = rows[:at]
            if cut:
                key = (-1, -1)  # written to meanwhile: read again by the next search
            if not blobs:
                self._loaded.pop(path, None)
                return None
            owner = np.repeat(np.arange(len(blobs), dtype=np.int32), counts)
            codes = np.packbits(rows > 0, axis=1).view(np.uint64)
            loaded = self._loaded[path] = _Loaded(key, blobs, owner, rows, codes)
            return loaded

    def nearest(self, path: str, db: sqlite3.Connection, query: str, limit: int | None = None) -> list[str]:
        """The stored texts (their blobs) whose best passage is nearest ``query``, nearest first."""
        loaded = self._load(path, db)
        if loaded is None:
            return []
        import numpy as np

        q = model().embed([query])[0]
        if not q.any():
            return []
        # First cut by the signs alone (a Hamming distance over 4 words per passage: a tenth of the
        # time of the product over the whole int8 matrix), then the exact cosine of the nearest.
        code = np.packbits(q > 0).view(np.uint64)
        agree = KEPT - np.bitwise_count(loaded.codes ^ code).sum(axis=1, dtype=np.int32)
        n = min(SHORTLIST, len(agree))
        near = np.argpartition(-agree, n - 1)[:n]
        exact = loaded.rows[near].astype(np.float32) @ q
        best: dict[int, float] = {}
        for text, score in zip(loaded.owner[near].tolist(), exact.tolist()):
            if score >= MIN_SIMILARITY * SCALE and score > best.get(text, -1.0):
                best[text] = score
        bar = RELATIVE * max(best.values(), default=0.0)
        ranked = sorted((t for t in best if best[t] >= bar), key=lambda t: -best[t])[:limit or CANDIDATES]
        return [loaded.blobs[t] for t in ranked]


VECTORS = MeaningVectors()


def near_hits(path: str, db: sqlite3.Connection, searcher: tantivy.Searcher, schema: tantivy.Schema,
              query: str) -> list[tuple[int, Any]]:
    """The documents nearest ``query`` in meaning, as (rank, address) of ``searcher``: every
    document whose text is one of the nearest, the copies of a text sharing its rank."""
    import tantivy

    blobs = VECTORS.nearest(path, db, query)
    if not blobs:
        return []
    rank_of = {b: r for r, b in enumerate(blobs)}
    marks = ",".join("?" * len(blobs))
    uris = {uri: blob for uri, blob in db.execute(
        f"SELECT uri, blob FROM docs WHERE status='ok' AND blob IN ({marks})", blobs)}
    if not uris:
        return []
    found = searcher.search(tantivy.Query.term_set_query(schema, "uri", list(uris)), len(uris)).hits
    out = []
    for _, a in found:
        blob = uris.get(str(searcher.doc(a).get_first("uri")))
        if blob is not None:
            out.append((rank_of[blob], a))
    return sorted(out, key=lambda ra: ra[0])


def fuse(hits: list[Any], alone: list[tuple[int, Any]]) -> list[Any]:
    """``hits`` (score, address) of the words as they ranked, then ``alone``, the documents of
    ``near_hits`` the words do not match (index/search.py asks the index which), nearest first,
    scored below every word hit. A document that holds the query's words ranks as it would without
    meaning: fused by reciprocal rank instead, exact-word known items lost first places
    (docs/benchmarks.md, "Meaning search"), and meaning found no more."""
    low = min((float(score) for score, _ in hits), default=1.0)
    return [*hits, *((low * 0.5 / (rank + 1), a) for rank, a in alone)]
