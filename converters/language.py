"""The language of a document's text, told in the worker process that converted it.

py3langid (a naive Bayes model over byte n-grams, 97 languages, numpy) reads a bounded sample
of the main text: the first SAMPLE characters. benchmarks/language_detect.py compares it with
lingua (low accuracy mode) on corpus pages: three points less accurate (both err on pages mixing
two languages), eight times faster (a cost every document pays in a worker), the same memory
(docs/benchmarks.md). The
model loads on first use, once per worker.

The code is ISO 639-1 (``de``); index/fulltext.py stems the body with that language's Snowball
stemmer when tantivy has one, English otherwise.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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


@functools.cache
def _identifier() -> Any:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def detect(text: str) -> str | None:
    """The ISO 639-1 code of the language of ``text`` (its first SAMPLE characters), None when
    too short or too uncertain to tell."""
    sample = text[:SAMPLE]
    if len(_LETTER.findall(sample, 0, 4 * MIN_LETTERS)) < MIN_LETTERS:
        return None
    code, confidence = _identifier().classify(sample)
    if confidence < MIN_CONFIDENCE:
        return None
    return _ALIASES.get(str(code), str(code))


def tag(doc: "Document") -> None:
    """Record the language of ``doc``'s main text in its metadata (``lang``) when told."""
    if "lang" in doc.meta:
        return
    try:
        code = detect(doc.body_text())
    except Exception:  # a detector bug must cost the language, never the document
        logger.exception("language detection failed on %s", doc.uri)
        return
    if code:
        doc.meta["lang"] = code
