"""The language of a document's text, told in the worker process that converted it.

py3langid (a naive Bayes model over byte n-grams, 97 languages, numpy) reads a bounded sample
of the main text: the first SAMPLE characters. benchmarks/language_detect.py compares it with
lingua (low accuracy mode) on corpus pages: three points less accurate (both err on pages mixing
two languages), eight times faster (a cost every document pays in a worker), the same memory
(docs/benchmarks.md).

Its model, not its inner loop: py3langid walks its n-gram automaton one byte at a time in Python
(0.6 ms a document, a fifth of a small file's conversion), and every process that loads the model
unpacks 75 MiB from an xz file (0.7 s, each worker start). Here the model's arrays are unpacked
once into a cache folder and mapped read-only (``_model``), so workers share one copy and start
at once, and the walk is done with numpy (``_states``); the answer is py3langid's
(tests/test_language.py compares the two on real texts).

The code is ISO 639-1 (``de``); index/fulltext.py stems the body with that language's Snowball
stemmer when tantivy has one, English otherwise.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
import tempfile
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

# numpy is imported in the functions that use it: `deskdex search` imports this module (through
# converters.convert) and must not pay numpy's import.
if TYPE_CHECKING:
    import numpy as np

    from .document import Document

logger = logging.getLogger(__name__)

SAMPLE = 2000  # characters of main text read: a page tells its language; more costs time alone
MIN_LETTERS = 40  # fewer letters than this (a caption, a file of numbers) tell no language
MIN_CONFIDENCE = 0.6  # normalized probability below which the answer is a guess: none recorded
# Varieties with one stemmer: Norwegian Bokmål/Nynorsk (``no``), Moroccan Arabic, Wu Chinese.
_ALIASES = {"nb": "no", "nn": "no", "ary": "ar", "wuu": "zh"}
# What detect() may answer: py3langid's languages (tests/test_tokens.py checks the model's list),
# varieties folded into their language by _ALIASES. ``lang:`` accepts these (index/query.py).
CODES = frozenset("""
ace af am an ar arz as az ba bcl be bg bn br bs ca crh cs cy da de dz el en eo es et eu ext fa fi fo fr fuv fy
ga gcf gcr gd gl gom grc gu gug guw ha hbo he hi hr ht hu hy id ig is it ja jv ka kab kik kk km kn ko ku ky la
lb lg lij ln lo lt ltg lv mg mk ml mn mr ms mt my ne nl no nso oc om or pa pcm pl ps pt qu ro ru rw sa sdh se si
sk sl sn so sq sr st sv sw ta te tg th tk tl tr tt ug uk ur uz uzs vec vi vo wa xh yo yue zh zu zxx""".split())
_LETTER = re.compile(r"[^\W\d_]")


@dataclass
class _Model:
    """py3langid's model as arrays: ``nextmove[rowbase[state] + byte]`` is the automaton's next
    state, ``output[state]`` the feature it counts there (-1: none), ``ptc`` the features'
    log-probabilities per class (float32: the model's float16 is converted exactly, and numpy's
    float16 arithmetic would cost more than the rest of the detection), ``pc`` the classes'
    priors. ``depth`` is the longest n-gram: the state after a byte depends on that many bytes
    alone."""

    nextmove: np.ndarray
    rowbase: np.ndarray
    output: np.ndarray
    ptc: np.ndarray
    pc: np.ndarray
    classes: tuple[str, ...]
    depth: int

    @functools.cached_property
    def labels(self) -> tuple[tuple[str, ...], np.ndarray]:
        """The distinct labels, in the order of their first column, and the 0/1 matrix that sums
        a label's columns: the model has some twice (``srl`` and ``sr``), and py3langid adds their
        probabilities."""
        import numpy as np

        names = tuple(dict.fromkeys(self.classes))
        fold = np.zeros((len(self.classes), len(names)), dtype=np.float32)
        fold[np.arange(len(self.classes)), [names.index(c) for c in self.classes]] = 1.0
        return names, fold


_ARRAYS = ("nextmove", "rowbase", "output", "ptc", "pc")


def _unpacked() -> _Model:
    """The model from py3langid's own file (0.7 s, 75 MiB while it runs)."""
    import numpy as np
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    ident = LanguageIdentifier.from_model_file(MODEL_FILE)
    row = np.asarray(ident.tk_row, dtype=np.uint32)
    nextmove = np.frombuffer(ident.tk_nextmove, dtype=np.uint32) if ident.tk_nextmove.itemsize == 4 \
        else np.asarray(ident.tk_nextmove, dtype=np.uint32)
    # The depth of every state, breadth first from the root: a state reached in d bytes at the
    # fewest stands for an n-gram of d bytes (the walk never gets deeper than it has read).
    depth = np.full(len(row), -1, dtype=np.int64)
    depth[0], frontier, d = 0, np.zeros(1, dtype=np.int64), 0
    while frontier.size:
        reached = np.unique(nextmove[((row[frontier].astype(np.int64) << 8)[:, None] + np.arange(256)).ravel()])
        frontier = reached[depth[reached] < 0]
        d += 1
        depth[frontier] = d
    return _Model(nextmove=nextmove, rowbase=row << 8, output=np.asarray(ident.tk_output, dtype=np.int32),
                  ptc=np.asarray(ident.nb_ptc, dtype=np.float32), pc=np.asarray(ident.nb_pc, dtype=np.float32),
                  classes=tuple(ident.nb_classes), depth=int(depth.max()))


def _cache_dir() -> str:
    """Where the unpacked model lives: the user's cache, one folder per py3langid model file."""
    import platformdirs
    from py3langid.langid import MODEL_DIR, MODEL_FILE

    st = os.stat(MODEL_DIR / MODEL_FILE)
    return os.path.join(platformdirs.user_cache_dir("deskdex"), f"langid-{st.st_size}-{int(st.st_mtime)}")


def _write(model: _Model, folder: str) -> None:
    """Write the arrays beside each other and move the folder into place at once: a reader
    never sees half of it, and two processes writing it at the same time both succeed."""
    import numpy as np

    parent = os.path.dirname(folder)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".langid-", dir=parent)
    try:
        for name in _ARRAYS:
            np.save(os.path.join(tmp, name + ".npy"), getattr(model, name))
        with open(os.path.join(tmp, "model.json"), "w") as f:
            json.dump({"classes": model.classes, "depth": model.depth}, f)
        os.rename(tmp, folder)
    except OSError:
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)
        if not os.path.isdir(folder):  # lost a race to another process: its copy serves
            raise


@functools.cache
def _model() -> _Model:
    """The model mapped from its cache (unpacked there on first use); in memory when the cache
    cannot be written (a read-only home)."""
    import numpy as np

    try:
        folder = _cache_dir()
        if not os.path.isfile(os.path.join(folder, "model.json")):
            _write(_unpacked(), folder)
        with open(os.path.join(folder, "model.json")) as f:
            meta = json.load(f)
        # Plain arrays over the mapping: np.memmap's own indexing costs more than the lookups.
        arrays = {name: np.load(os.path.join(folder, name + ".npy"), mmap_mode="r").view(np.ndarray)
                  for name in _ARRAYS}
        return _Model(**arrays, classes=tuple(meta["classes"]), depth=int(meta["depth"]))
    except (OSError, ValueError, KeyError) as exc:
        logger.debug("language model cache unusable (%s): unpacked in memory", exc)
        return _unpacked()


def _states(m: _Model, data: np.ndarray) -> np.ndarray:
    """The automaton's state after each byte, all positions at once: the state after byte i is
    the walk from the root over bytes i - depth + 1 .. i, so ``depth`` steps over every position
    give what a walk over the whole text gives."""
    import numpy as np

    n = len(data)
    state = np.zeros(n, dtype=np.uint32)
    for k in range(min(m.depth, n) - 1, -1, -1):
        state[k:] = m.nextmove[m.rowbase[state[k:]] + data[:n - k]]
    return state


def classify(text: str) -> tuple[str, float]:
    """(language, probability) for ``text`` as py3langid's ``classify`` with normalised
    probabilities tells them."""
    import numpy as np

    m = _model()
    if text.isupper():
        text = text.lower()
    data = np.frombuffer(unicodedata.normalize("NFC", text).encode("utf8", "surrogatepass"), dtype=np.uint8)
    features = m.output[_states(m, data)]
    features = features[features >= 0]
    if not features.size:
        scores = np.zeros(len(m.classes), dtype=np.float32)
    else:
        idx, counts = np.unique(features, return_counts=True)
        scores = np.log1p(counts.astype(np.float32)) @ m.ptc[idx] + m.pc
        # py3langid's calibration: the temperature sqrt(bytes) keeps probabilities comparable
        # across text lengths.
        scores *= 1.0 / math.sqrt(len(data) or 1)
    np.exp(scores - scores.max(), out=scores)
    names, fold = m.labels
    probs = scores @ fold
    best = int(probs.argmax())
    return names[best], float(probs[best] / scores.sum())


def detect(text: str) -> str | None:
    """The ISO 639-1 code of the language of ``text`` (its first SAMPLE characters), None when
    too short or too uncertain to tell."""
    sample = text[:SAMPLE]
    if len(_LETTER.findall(sample, 0, 4 * MIN_LETTERS)) < MIN_LETTERS:
        return None
    code, confidence = classify(sample)
    if confidence < MIN_CONFIDENCE:
        return None
    return _ALIASES.get(code, code)


def tag(doc: "Document") -> None:
    """Record the language of ``doc``'s main text in its metadata (``lang``) when told."""
    if "lang" in doc.meta:
        return
    try:
        code = detect(doc.body_text(limit=SAMPLE))  # not the whole text joined, to read its beginning
    except Exception:  # a detector bug must cost the language, never the document
        logger.exception("language detection failed on %s", doc.uri)
        return
    if code:
        doc.meta["lang"] = code
