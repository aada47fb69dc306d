"""The tantivy index: schema, analyzers, and turning a catalog row plus Document into fields.

Custom analyzers are not saved with a tantivy index, so ``open_index`` registers them on every
open. Body text is indexed but not stored: snippets come from the text store, which keeps the
index small and the catalog the one source of truth.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

import tantivy

from deskdex.converters.detect import extension
from deskdex.errors import IndexBusy, StoreError, StoreUnwritable

from .access import reader_terms
from .storeerrors import from_tantivy, translated

if TYPE_CHECKING:
    from deskdex.converters.document import Document

    from .store import Row

SCHEMA_VERSION = "4"
TEXT = "words"  # lower-cased, accent-folded, English-stemmed words
PATH = "pathwords"  # the same without stemming, for file names and folders
FIELD_BOOSTS = {"title": 4.0, "headings": 2.0, "anchors": 2.0, "path": 1.5, "author": 1.5, "body": 1.0, "boiler": 0.3}
DEFAULT_FIELDS = list(FIELD_BOOSTS)


def build_schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("uri", stored=True, tokenizer_name="raw")
    sb.add_text_field("title", stored=True, tokenizer_name=TEXT)
    sb.add_text_field("headings", stored=False, tokenizer_name=TEXT)
    sb.add_text_field("body", stored=False, tokenizer_name=TEXT)
    sb.add_text_field("boiler", stored=False, tokenizer_name=TEXT)
    sb.add_text_field("author", stored=True, tokenizer_name=TEXT)
    sb.add_text_field("anchors", stored=False, tokenizer_name=TEXT)  # text of links pointing here (web)
    # Chinese, Japanese and Korean have no spaces: their runs are indexed as character bigrams
    # (phrase-searchable) and single characters, as Lucene's CJK analyzer does.
    sb.add_text_field("cjk", stored=False, tokenizer_name="whitespace")
    sb.add_text_field("cjk1", stored=False, tokenizer_name="whitespace", index_option="freq")
    sb.add_text_field("path", stored=True, tokenizer_name=PATH)
    sb.add_facet_field("folder")
    sb.add_text_field("ext", stored=True, tokenizer_name="raw")
    sb.add_text_field("mime", stored=True, tokenizer_name="raw")
    sb.add_text_field("source", stored=True, tokenizer_name="raw")
    sb.add_text_field("blob", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_integer_field("size", stored=True, indexed=True, fast=True)
    sb.add_integer_field("mtime", stored=True, indexed=True, fast=True)
    sb.add_integer_field("cluster", stored=True, indexed=True, fast=True)
    # Who may read the document (uids, -1 for everyone; index/access.py): filters an
    # enterprise-mode daemon's results to what the caller may read.
    sb.add_integer_field("reader", stored=False, indexed=True)
    return sb.build()


def _analyzers() -> dict[str, tantivy.TextAnalyzer]:
    T, F = tantivy.Tokenizer, tantivy.Filter

    def base() -> tantivy.TextAnalyzerBuilder:  # a builder is consumed by build()
        return tantivy.TextAnalyzerBuilder(T.simple()).filter(F.remove_long(60)).filter(F.lowercase()).filter(F.ascii_fold())

    return {TEXT: base().filter(F.stemmer("english")).build(), PATH: base().build()}


ANALYZERS = _analyzers()


def analyze(text: str) -> list[str]:
    return ANALYZERS[TEXT].analyze(text)


def analyze_path(text: str) -> list[str]:
    return ANALYZERS[PATH].analyze(text)


CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]+")


def cjk_grams(text: str) -> tuple[str, str]:
    """(bigrams, unigrams) of the CJK runs in ``text``, space-separated, runs kept apart by a gap."""
    bi, uni = [], []
    for run in CJK.findall(text):
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
    for name, analyzer in ANALYZERS.items():
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
    }
    if row.blob:
        fields["blob"] = row.blob
    if row.readers:
        fields["reader"] = reader_terms(row.readers)
    if doc is not None:
        fields["body"] = doc.body_text()
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
        bi, uni = cjk_grams(doc.title + "\n" + fields["body"] + "\n" + boiler)  # type: ignore[operator]
        if uni:
            fields["cjk"], fields["cjk1"] = bi, uni
    d = tantivy.Document(**fields)
    if row.source == "files" and row.path:
        folder = os.path.dirname(row.path)
        d.add_facet("folder", tantivy.Facet.from_string(folder if folder.startswith("/") else "/" + folder))
    return d
