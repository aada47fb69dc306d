"""What the writer's memory comes back to after large files (issue 33): the C heap is given back to
the system as the writer goes, rather than held at the largest text's size."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskdex.converters.limits import Limits
from deskdex.index import Collection
from deskdex.pipeline.indexer import Indexer


def test_the_writer_gives_back_its_heap_after_large_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """After each TRIM_EVERY bytes of files stored, the writer hands the C heap's free memory back
    (glibc's malloc_trim, called for real here and counted): a large text's copies do not stay."""
    from deskdex.pipeline import indexer as indexer_module

    real = indexer_module._malloc_trim()
    if real is None:
        pytest.skip("not glibc: no malloc_trim")
    calls: list[int] = []

    def counted(pad: int) -> int:
        calls.append(pad)
        return real(pad)

    monkeypatch.setattr(indexer_module, "_malloc_trim", lambda: counted)
    docs = tmp_path / "docs"
    docs.mkdir()
    line = "the large file holds many words about the harbour and its ships\n"
    (docs / "large.txt").write_text(line * (indexer_module.TRIM_EVERY // len(line) + 1))
    (docs / "small.txt").write_text("a small note about the harbour\n")
    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        indexer = Indexer(coll, Limits(), workers=1)
        summary = indexer.sync([str(docs)], indexer.scan([str(docs)]))
        assert summary.indexed == 2
        assert calls == [0]  # once: the large file passed the mark, the small one did not again
        (docs / "small.txt").write_text("a small note about the harbour, changed\n")
        indexer.sync([str(docs)], indexer.scan([str(docs)]))
        assert calls == [0]


def test_a_large_text_is_stored_and_indexed_without_copies_as_wide_as_its_widest_character(tmp_path: Path):
    """A long text with one emoji (the whole str four bytes a character once joined) is stored and
    indexed from pieces: the writer's Python allocations at their peak stay near the text's size
    in bytes (the joined text as str, its encoding and the body field at four bytes a character
    came to 15 times it). Every word is still found, the last piece's too, and a phrase in it."""
    import tracemalloc

    from deskdex.index.search import search

    docs = tmp_path / "docs"
    docs.mkdir()
    size = 4 << 20
    lines = [f"line {i} of the long harbour log, ship number{i} moored\n" for i in range(size // 50)]
    text = "".join(lines) + "the last line names the lighthouse keeper \U0001F600\n"
    (docs / "log.txt").write_text(text)
    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        indexer = Indexer(coll, Limits(), workers=1)
        tracemalloc.start()
        try:
            summary = indexer.sync([str(docs)], indexer.scan([str(docs)]))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert summary.indexed == 1
    # What the writer cannot help holding: the document as received (its blocks) and the stored
    # text's bytes. Measured: 6.8 times the text's bytes (the received document is 4) with the pieces, 12 with
    # the joined copies.
    assert peak < 9 * len(text.encode()), f"writer peak {peak / 2**20:.0f} MiB for a {len(text) / 2**20:.0f} MB text"
    with Collection.open(str(tmp_path / "data")) as coll:
        for query in ("number7", f"number{len(lines) - 1}", "lighthouse", '"lighthouse keeper"'):
            assert [h["path"] for h in search(coll, query)["hits"]] == [str(docs / "log.txt")], query
