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
