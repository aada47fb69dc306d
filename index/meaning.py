"""Documents found by meaning as well as by their words (docs/search.md, "Meaning").

Passages of each stored text (windows of ``PASSAGE_WORDS`` words, and the title with the file's name
as one more) are embedded with the static token vectors the ``wordllama`` wheel ships: a passage's
vector is the average of its tokens' vectors, normalised. Nothing is downloaded: the weights and the
tokenizer file are read from the installed wheel by path (its own loader looks for the tokenizer in
another folder, then fetches it from the network), the weights mapped from the file.

Vectors are kept in the catalog, one row per stored text (``meaning``, keyed like ``texts`` by the
text's checksum, so copies share one), each passage as 256 signed bytes (the unit vector times 127):
a quarter of float32, and a search's cosine, a matrix product, is unchanged to within 1 %. A search
takes the documents whose best passage is nearest to the query and fuses that ranking with the words'
by reciprocal rank (``fuse``). Only plain queries of words are fused: a filter (``ext:``, ``after:``)
or an operator asks for what the words say, which meaning cannot honour.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from deskdex.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    import tantivy

__all__ = ["Model", "MeaningVectors", "drop_all", "fuse", "model", "plain_words"]

PASSAGE_WORDS = 150
# Passages of one text at most: the first ones. A long text's beginning says what it is about,
# and the store must stay small (docs/search.md, "Meaning": sizes measured).
MAX_PASSAGES = 8
DIM = 256
SCALE = 127.0
CANDIDATES = 30  # documents by meaning fused with the words' ranking (100: the same MRR on train, slower)
RRF_K = 60
# The meaning ranking counts for less than the words': an exact word stays first (benchmarks/meaning_search.py).
MEANING_WEIGHT = 0.5
# Least cosine of a query and a document's best passage for the document to count as near: unrelated
# texts score about 0 to 0.15 with this model, a text on the query's subject 0.25 and more.
MIN_SIMILARITY = 0.2
CACHE_WORDS = 50_000  # distinct words whose token ids are kept (about 8 MiB at most)
SHORTLIST = 1000  # passages nearest by their signs, whose exact cosine is computed

TABLE = "CREATE TABLE IF NOT EXISTS meaning(blob TEXT PRIMARY KEY, vecs BLOB NOT NULL)"
_PLAIN = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*")
_OPERATORS = {"AND", "OR", "NOT"}


def _files() -> tuple[str, str]:
    """The weights and tokenizer files inside the installed wordllama wheel."""
    import importlib.util

    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("meaning = true needs the wordllama package: pip install 'wordllama>=0.4.0.post1'")
    base = list(spec.submodule_search_locations)[0]
    return (os.path.join(base, "weights", "l2_supercat_256.safetensors"),
            os.path.join(base, "tokenizers", "l2_supercat_tokenizer_config.json"))


def _mapped(path: str) -> np.ndarray[Any, Any]:
    """The token table of a safetensors file, mapped from the file rather than read: a process
    holds only the pages of the tokens it meets (a search: a few), shared with every other process
    using it. The format: a little-endian u64 header length, the JSON header, then the data."""
    import json

    import numpy as np

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
    return np.memmap(path, dtype=np.float16, mode="r", offset=8 + n + start, shape=shape)


class Model:
    """The token vectors and tokenizer; ``embed`` gives unit vectors. Thread-safe."""

    def __init__(self, weights: str, tokenizer: str) -> None:
        from tokenizers import Tokenizer

        for path in (weights, tokenizer):
            if not os.path.isfile(path):
                raise ConfigError(f"meaning = true: the model file {path} is missing: reinstall wordllama")
        try:
            table = _mapped(weights)
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise ConfigError(f"meaning = true: cannot read the model file {weights}: {exc}") from None
        if table.ndim != 2 or table.shape[1] != DIM:
            raise ConfigError(f"meaning = true: the model file {weights} holds a {table.shape} table, "
                              f"not token vectors of {DIM} dimensions")
        try:
            self._tok = Tokenizer.from_file(tokenizer)
        except Exception as exc:  # the tokenizers library raises a bare Exception for a bad file
            raise ConfigError(f"meaning = true: cannot read the tokenizer file {tokenizer}: {exc}") from None
        self._tok.no_padding()
        self._tok.no_truncation()
        self._table: np.ndarray[Any, Any] = table
        self._cache: dict[str, list[int]] = {}
        self._cache_lock = threading.Lock()

    def _ids(self, text: str) -> list[int]:
        """The token ids of ``text``, word by word through a cache: the tokenizer marks each word's
        start (a space becomes "▁") and no token spans two words, so the ids are those of the whole
        text, at a tenth of the tokenizer's time on the words a collection repeats."""
        cache = self._cache
        out: list[int] = []
        for word in text.split():
            ids = cache.get(word)
            if ids is None:
                ids = self._tok.encode(word, add_special_tokens=False).ids
                with self._cache_lock:
                    if len(cache) >= CACHE_WORDS:
                        cache.clear()
                    cache[word] = ids
            out.extend(ids)
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        """Unit vectors (float32, one row per text); a text with no tokens gives zeros."""
        import numpy as np

        out = np.zeros((len(texts), DIM), dtype=np.float32)
        last = self._table.shape[0] - 1
        for i, text in enumerate(texts):
            ids = self._ids(text)
            if not ids:
                continue
            v = self._table[np.minimum(np.asarray(ids, dtype=np.int64), last)].sum(axis=0, dtype=np.float32)
            norm = float(np.linalg.norm(v))
            if norm > 0:
                out[i] = v / norm
        return out


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
    words = text.split()
    head = f"{title} {name}".strip()
    if len(words) <= PASSAGE_WORDS:
        return [p] if (p := f"{head} {' '.join(words)}".strip()) else []
    out = [head] if head else []
    for i in range(0, min(len(words), PASSAGE_WORDS * MAX_PASSAGES), PASSAGE_WORDS):
        out.append(" ".join(words[i:i + PASSAGE_WORDS]))
    return out


def store(db: sqlite3.Connection, m: Model, blob: str, text: str, title: str, name: str) -> None:
    """Embed a stored text's passages, once per text (copies share them)."""
    import numpy as np

    if db.execute("SELECT 1 FROM meaning WHERE blob=?", (blob,)).fetchone():
        return
    parts = passages(text, title, name)
    if not parts:
        return
    codes = np.rint(m.embed(parts) * SCALE).astype(np.int8)
    db.execute("INSERT INTO meaning(blob, vecs) VALUES(?,?)", (blob, codes.tobytes()))


def create(db: sqlite3.Connection) -> None:
    db.execute(TABLE)


def collect_garbage(db: sqlite3.Connection) -> int:
    """Drop the vectors of texts no document refers to any more (as the text store does its texts)."""
    if not _has_table(db):
        return 0
    return db.execute("DELETE FROM meaning WHERE NOT EXISTS (SELECT 1 FROM docs WHERE docs.blob = meaning.blob)").rowcount


def _has_table(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meaning'").fetchone() is not None


def drop_all(db: sqlite3.Connection) -> None:
    """meaning = false: no vectors are kept (those of an earlier run with it on are dropped)."""
    if _has_table(db):
        db.execute("DROP TABLE meaning")


def plain_words(query: str) -> bool:
    """A query of words alone: no field, filter, phrase, wildcard or operator."""
    tokens = query.split()
    return bool(tokens) and all(_PLAIN.fullmatch(t.strip(",;?!")) is not None and t not in _OPERATORS
                                for t in tokens)


@dataclass
class _Loaded:
    key: tuple[int, int]
    blobs: list[str]
    owner: Any  # np.ndarray: the text (index in blobs) of each passage
    rows: Any  # np.ndarray int8 (passages, DIM)
    codes: Any  # np.ndarray uint64 (passages, DIM // 64): the signs of rows, for the first cut


class MeaningVectors:
    """The catalog's vectors, held in memory as one int8 matrix and read again when the table changed."""

    def __init__(self) -> None:
        self._loaded: dict[str, _Loaded] = {}
        self._lock = threading.Lock()

    def _load(self, path: str, db: sqlite3.Connection) -> _Loaded | None:
        if not _has_table(db):  # meaning is off for this index: numpy is not even imported
            return None
        import numpy as np

        count, last = db.execute("SELECT count(*), coalesce(max(rowid), 0) FROM meaning").fetchone()
        key = (int(count), int(last))
        with self._lock:
            have = self._loaded.get(path)
            if have is not None and have.key == key:
                return have
            # Into one array made to size: a list of the rows' bytes joined would hold them twice.
            total = db.execute("SELECT coalesce(sum(length(vecs)), 0) FROM meaning").fetchone()[0] // DIM
            rows = np.empty((total, DIM), dtype=np.int8)
            blobs: list[str] = []
            counts: list[int] = []
            at, cut = 0, False
            for blob, vecs in db.execute("SELECT blob, vecs FROM meaning"):
                n = min(len(vecs) // DIM, total - at)  # rows added since the count wait for the next load
                cut = cut or n < len(vecs) // DIM
                rows[at:at + n] = np.frombuffer(vecs, dtype=np.int8, count=n * DIM).reshape(n, DIM)
                blobs.append(blob)
                counts.append(n)
                at += n
            rows = rows[:at]
            if cut or len(blobs) != key[0]:
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
        agree = DIM - np.bitwise_count(loaded.codes ^ code).sum(axis=1, dtype=np.int32)
        n = min(SHORTLIST, len(agree))
        near = np.argpartition(-agree, n - 1)[:n]
        exact = loaded.rows[near].astype(np.float32) @ q
        best: dict[int, float] = {}
        for text, score in zip(loaded.owner[near].tolist(), exact.tolist()):
            if score >= MIN_SIMILARITY * SCALE and score > best.get(text, -1.0):
                best[text] = score
        ranked = sorted(best, key=lambda t: -best[t])[:limit or CANDIDATES]
        return [loaded.blobs[t] for t in ranked]


VECTORS = MeaningVectors()


def fuse(path: str, db: sqlite3.Connection, searcher: tantivy.Searcher, schema: tantivy.Schema, query: str,
         hits: list[Any]) -> tuple[list[Any], int]:
    """``hits`` (score, address) of the words, fused by reciprocal rank with the documents nearest in
    meaning; and how many of these the words had not found. Scores are the fused ones."""
    import tantivy

    blobs = VECTORS.nearest(path, db, query)
    if not blobs:
        return hits, 0
    rank_of = {b: r for r, b in enumerate(blobs)}
    marks = ",".join("?" * len(blobs))
    uris = {uri: blob for uri, blob in db.execute(
        f"SELECT uri, blob FROM docs WHERE status='ok' AND blob IN ({marks})", blobs)}
    if not uris:
        return hits, 0
    found = searcher.search(tantivy.Query.term_set_query(schema, "uri", list(uris)), len(uris)).hits
    by_address: dict[tuple[int, int], float] = {}
    addresses: dict[tuple[int, int], Any] = {}
    for r, (_, a) in enumerate(hits):
        k = (a.segment_ord, a.doc)
        by_address[k] = by_address.get(k, 0.0) + 1.0 / (RRF_K + r + 1)
        addresses[k] = a
    added = 0
    for _, a in found:
        k = (a.segment_ord, a.doc)
        uri = searcher.doc(a).get_first("uri")
        blob = uris.get(str(uri))
        if blob is None:
            continue
        if k not in addresses:
            addresses[k] = a
            added += 1
        by_address[k] = by_address.get(k, 0.0) + MEANING_WEIGHT / (RRF_K + rank_of[blob] + 1)
    ordered = sorted(by_address.items(), key=lambda kv: -kv[1])
    return [(score, addresses[k]) for k, score in ordered], added
