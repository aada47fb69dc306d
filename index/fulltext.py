"""The tantivy index: schema, analyzers, and turning a catalog row plus Document into fields.

Custom analyzers are not saved with a tantivy index, so ``open_index`` registers them on every
open. Body text is indexed but not stored: snippets come from the text store, which keeps the
index small and the catalog the one source of truth.
"""

from __future__ import annotations

import functools
import os
import re
from typing import TYPE_CHECKING, Any

import tantivy

from deskdex.converters import extension
from deskdex.errors import IndexBusy, StoreError, StoreUnwritable

from .access import reader_terms
from .storeerrors import from_tantivy, translated

if TYPE_CHECKING:
    from deskdex.converters import Document

    from .store import Row

SCHEMA_VERSION = "5"  # 5: tokens split at a change of script, the name field, body per language
TEXT = "words"  # lower-cased, accent-folded, English-stemmed words
PATH = "pathwords"  # the same without stemming, for file names and folders
# The languages tantivy has a Snowball stemmer for, by ISO 639-1 code. A document in one of them
# other than English has its body in the field ``body_<code>``, analyzed with that language's
# stemmer; every other document, English or not recognized, has it in ``body`` (English stems).
LANGUAGES = {"ar": "arabic", "da": "danish", "de": "german", "el": "greek", "en": "english", "es": "spanish",
             "fi": "finnish", "fr": "french", "hu": "hungarian", "it": "italian", "nl": "dutch", "no": "norwegian",
             "pt": "portuguese", "ro": "romanian", "ru": "russian", "sv": "swedish", "ta": "tamil", "tr": "turkish"}
STEMMED = tuple(code for code in LANGUAGES if code != "en")  # those with a body field of their own
# ``name``: the words of a file's name and its folders' names, split at camelCase and digits.
# 2.0, as headings: a name is chosen by a person to say what the file is, like a heading, but is
# often abbreviated and its folders' words name many files; as the title (2.0, issue 17), which holds
# the file name already when a document has no title of its own.
FIELD_BOOSTS = {"title": 2.0, "headings": 2.0, "anchors": 2.0, "path": 1.5, "author": 1.5, "body": 1.0, "boiler": 0.3,
                "name": 2.0}
DEFAULT_FIELDS = list(FIELD_BOOSTS)


def body_field(lang: str | None) -> str:
    """The field a document's body goes to for its language code (None: not detected)."""
    return f"body_{lang}" if lang in STEMMED else "body"


def language_code(word: str) -> str | None:
    """The code of a language given by code or English name (``de``, ``german``), None if unknown."""
    word = word.lower()
    if word in LANGUAGES:
        return word
    return next((code for code, name in LANGUAGES.items() if name == word), None)


def _field_specs() -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, name, options) of every field, in the schema's order: a field's place here is the
    id tantivy's score explanations name it by (index/shards.py reads them)."""
    text = "text"
    specs: list[tuple[str, str, dict[str, Any]]] = [
        (text, "uri", {"stored": True, "tokenizer_name": "raw"}),
        (text, "title", {"stored": True, "tokenizer_name": TEXT}),
        (text, "headings", {"stored": False, "tokenizer_name": TEXT}),
        (text, "body", {"stored": False, "tokenizer_name": TEXT}),
        *((text, body_field(code), {"stored": False, "tokenizer_name": f"{TEXT}_{code}"}) for code in STEMMED),
        (text, "name", {"stored": False, "tokenizer_name": TEXT}),
        (text, "boiler", {"stored": False, "tokenizer_name": TEXT}),
        (text, "author", {"stored": True, "tokenizer_name": TEXT}),
        (text, "anchors", {"stored": False, "tokenizer_name": TEXT}),  # text of links pointing here (web)
        # Chinese, Japanese and Korean have no spaces: their runs are indexed as character bigrams
        # (phrase-searchable) and single characters, as Lucene's CJK analyzer does.
        (text, "cjk", {"stored": False, "tokenizer_name": "whitespace"}),
        (text, "cjk1", {"stored": False, "tokenizer_name": "whitespace", "index_option": "freq"}),
        (text, "path", {"stored": True, "tokenizer_name": PATH}),
        ("facet", "folder", {}),
        (text, "ext", {"stored": True, "tokenizer_name": "raw"}),
        (text, "mime", {"stored": True, "tokenizer_name": "raw"}),
        (text, "source", {"stored": True, "tokenizer_name": "raw"}),
        (text, "lang", {"stored": True, "tokenizer_name": "raw"}),
        (text, "blob", {"stored": True, "tokenizer_name": "raw", "index_option": "basic"}),
        ("integer", "size", {"stored": True, "indexed": True, "fast": True}),
        ("integer", "mtime", {"stored": True, "indexed": True, "fast": True}),
        ("integer", "cluster", {"stored": True, "indexed": True, "fast": True}),
        # Who may read the document (uids, -1 for everyone; index/access.py): filters an
        # enterprise-mode daemon's results to what the caller may read.
        ("integer", "reader", {"stored": False, "indexed": True}),
    ]
    return specs


FIELD_NAMES = tuple(name for _, name, _ in _field_specs())


def build_schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    for kind, name, options in _field_specs():
        getattr(sb, f"add_{kind}_field")(name, **options)
    return sb.build()


# A token is a run of letters, digits and combining marks of one script: a change of script ends
# it (``Goldrei的`` is ``goldrei`` and ``的``, ``Москваcity`` two words), in the regex engine of
# tantivy (Rust), with no Python per token. Chinese, Japanese and Korean count as one script, as
# their words mix them. Scripts not named here each make runs of letters of any of them.
_SCRIPTS = ("Latin", "Cyrillic", "Greek", "Armenian", "Georgian", "Arabic", "Hebrew", "Thai", "Devanagari")
_CJK_SCRIPTS = ("Han", "Hiragana", "Katakana", "Hangul")
_NAMED = "".join(r"\p{%s}" % name for name in (*_SCRIPTS, *_CJK_SCRIPTS))
TOKEN_PATTERN = "|".join([*(r"[\p{%s}\p{Nd}\p{Mn}]+" % name for name in _SCRIPTS),
                          "[%s]+" % "".join(r"\p{%s}" % name for name in _CJK_SCRIPTS),
                          r"[[\p{L}\p{N}\p{M}]&&[^%s]]+" % _NAMED])

# The same in Python, for the few places that split text themselves (index/snippets.py): \w
# has no scripts, so the scripts are ranges of code points; CJK as CJK below.
_RANGES = {"Cyrillic": "\u0400-\u052f", "Greek": "\u0370-\u03ff\u1f00-\u1fff", "Armenian": "\u0530-\u058f",
           "Hebrew": "\u0590-\u05ff", "Arabic": "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff",
           "Devanagari": "\u0900-\u097f", "Thai": "\u0e00-\u0e7f", "Georgian": "\u10a0-\u10ff"}
_CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
WORD = re.compile("|".join([r"[^\W_%s%s]+" % ("".join(_RANGES.values()), _CJK_RANGES),
                            *(r"(?:(?=\w)[%s\d])+" % r for r in _RANGES.values()), "[%s]+" % _CJK_RANGES]))


@functools.cache
def analyzers() -> dict[str, tantivy.TextAnalyzer]:
    """Every field's analyzer, built at first use (each compiles the token pattern: 20 ms in all,
    which a run that opens no index, such as `deskdex index` finding nothing changed, does not pay)."""
    T, F = tantivy.Tokenizer, tantivy.Filter

    def base() -> tantivy.TextAnalyzerBuilder:  # a builder is consumed by build()
        return tantivy.TextAnalyzerBuilder(T.regex(TOKEN_PATTERN)).filter(F.remove_long(60)).filter(F.lowercase())

    out = {TEXT: base().filter(F.ascii_fold()).filter(F.stemmer("english")).build(),
           PATH: base().filter(F.ascii_fold()).build()}
    for code in STEMMED:
        # Stemmed before accents are folded: Snowball's rules know the accented letters.
        out[f"{TEXT}_{code}"] = base().filter(F.stemmer(LANGUAGES[code])).filter(F.ascii_fold()).build()
    return out


def analyze(text: str, lang: str | None = None) -> list[str]:
    """The terms of ``text`` as the body of a document in ``lang`` has them (None: English)."""
    return analyzers()[f"{TEXT}_{lang}" if lang in STEMMED else TEXT].analyze(text)


def analyze_path(text: str) -> list[str]:
    return analyzers()[PATH].analyze(text)


def name_words(name: str) -> str:
    """A file or folder name with its words apart, for the ``name`` field (its analyzer splits
    at ``-``, ``_``, ``.``): ``MyReport2024`` is ``My Report 2024``, ``HTMLFile`` ``HTML File``,
    ``ΜουσικήΣυλλογή`` ``Μουσική Συλλογή``: camelCase in any cased script, and letters against
    digits. A walk over the characters (str's Unicode classes, which ``re`` lacks): a name is
    short, and this runs once a document, not once a word."""
    out: list[str] = []
    prev = ""
    for i, ch in enumerate(name):
        if prev and (
            (prev.isalpha() and ch.isdecimal()) or (prev.isdecimal() and ch.isalpha())
            or (prev.islower() and ch.isupper())
            or (prev.isupper() and ch.isupper() and name[i + 1:i + 2].islower())
        ):
            out.append(" ")
        out.append(ch)
        prev = ch
    return "".join(out)


CJK = re.compile("[%s]+" % _CJK_RANGES)


def cjk_grams(*texts: str) -> tuple[str, str]:
    """(bigrams, unigrams) of the CJK runs in ``texts``, space-separated, runs kept apart by a gap.
    Several texts rather than one joined: a long body is not copied to be read."""
    bi, uni = [], []
    for run in (run for text in texts for run in CJK.findall(text)):
        uni.append(" ".join(run))
        if len(run) > 1:
            bi.append(" ".join(run[i:i + 2] for i in range(len(run) - 1)))
    # A separator word keeps a phrase from matching across two runs.
    return " | ".join(bi), " ".join(uni)


def open_index(directory: str, create: bool) -> tantivy.Index:
    if create:
        with translated(directory):
            os.makedirs(directory, mode=0o700, exist_ok=True)
    elif not os.path.isdir(directory):
        raise StoreError(f"no tantivy index in {directory}")
    try:
        index = tantivy.Index(build_schema(), path=directory, reuse=True)
    except ValueError as exc:
        error = from_tantivy(exc, directory)
        if isinstance(error, StoreUnwritable):
            raise error from exc
        raise StoreError(f"cannot open the index in {directory}: {exc}") from exc
    for name, analyzer in analyzers().items():
        index.register_tokenizer(name, analyzer)
    # The default reader polls meta.json twice a second to pick up commits: a wake-up that a
    # quiet daemon must not have. Searches call reload() themselves.
    index.config_reader(reload_policy="Manual", num_warmers=0)
    return index


class Writer:
    """tantivy's IndexWriter, its failures translated into StoreErrors (index/storeerrors.py).

    ``discard()`` ends it for sure: after a failure, a traceback may still hold the Python object,
    and a writer left to the garbage collector would keep tantivy's lock from the next one."""

    def __init__(self, index: tantivy.Index, directory: str, heap_bytes: int = 64_000_000, threads: int = 1) -> None:
        self.directory = directory
        try:
            self._writer = index.writer(heap_size=heap_bytes, num_threads=threads)
        except ValueError as exc:
            if "LockBusy" in str(exc):
                raise IndexBusy("another deskdex process is writing to this index") from exc
            raise from_tantivy(exc, directory) from exc

    def add(self, doc: tantivy.Document) -> None:
        with translated(self.directory):
            self._writer.add_document(doc)

    def delete(self, uri: str) -> None:
        with translated(self.directory):
            self._writer.delete_documents_by_term("uri", uri)

    def delete_all(self) -> None:
        with translated(self.directory):
            self._writer.delete_all_documents()

    def commit(self) -> None:
        with translated(self.directory):
            self._writer.commit()

    def discard(self) -> None:
        """Drop what is not committed and let go of the writer and its lock (for good)."""
        with translated(self.directory):
            self._writer.rollback()
            self._writer.wait_merging_threads()  # consumes tantivy's writer: the lock goes with it


def to_fields(row: "Row", doc: "Document | None") -> tantivy.Document:
    """The tantivy document for a catalog row; ``doc`` None indexes the name and path only."""
    path = row.path or row.uri
    name = row.uri.rsplit("#", 1)[1] if "#" in row.uri else path
    fields: dict[str, object] = {
        "uri": row.uri,
        "path": [path, name] if "#" in row.uri else path,
        "ext": extension(name),
        "mime": row.mime or "",
        "source": row.source,
        "size": int(row.size),
        "mtime": int(row.mtime),
        "cluster": int(row.cluster or 0),
        "title": row.title or os.path.basename(name),
        "name": _names(row, name),
    }
    if row.lang:
        fields["lang"] = row.lang
    if row.blob:
        fields["blob"] = row.blob
    if row.readers:
        fields["reader"] = reader_terms(row.readers)
    if doc is not None:
        # A long body goes in as several values of its field, a piece of about 1 MB each, not as
        # one joined text: a phrase across two pieces (once a MB) is not found, and the writer
        # holds a 20 MB text at a byte a character (Document.body_chunks).
        body = doc.body_chunks()
        fields[body_field(row.lang)] = body[0] if len(body) == 1 else body
        boiler = doc.body_text(boilerplate=True)
        if boiler:
            fields["boiler"] = boiler
        heads = "\n".join(b.text for b in doc.headings())
        if heads:
            fields["headings"] = heads
        if doc.meta.get("author"):
            fields["author"] = doc.meta["author"]
        if doc.meta.get("anchors"):
            fields["anchors"] = doc.meta["anchors"]
        # str.isascii() is O(1) in CPython: most texts skip the scan, which finds no CJK in ASCII.
        if not (doc.title.isascii() and all(b.isascii() for b in body) and boiler.isascii()):
            bi, uni = cjk_grams(doc.title, *body, boiler)
            if uni:
                fields["cjk"], fields["cjk1"] = bi, uni
    d = tantivy.Document(**fields)
    if row.source == "files" and row.path:
        folder = os.path.dirname(row.path)
        d.add_facet("folder", tantivy.Facet.from_string(folder if folder.startswith("/") else "/" + folder))
    return d


def _names(row: "Row", name: str) -> str:
    """The words of the ``name`` field: the document's own name (an archive member's, for a
    member), then, for a file, the names of its folders."""
    own = name_words(os.path.basename(name.rstrip("/")))
    if row.source != "files" or not row.path:
        return own
    return own + "\n" + name_words(" ".join(os.path.dirname(row.path).split("/")))
