"""A converter that says what it runs under, for tests of a cluster worker's limits: a file named
probe* becomes a document whose text is the conversion's limits (time, file size, text) and the
converter process's address-space limit, as it sees them; any other text file converts as usual.
No real converter reports its limits, so this stands in for one."""

from __future__ import annotations

import resource

from deskdex.converters import Document, Source, plaintext
from deskdex.converters.convert import current_limits

OVERRIDES = {"text/plain": "tests.limits_probe:convert"}


def convert(source: Source, mime: str) -> Document:
    if not source.name.startswith("probe"):
        return plaintext.convert(source, mime)
    limits = current_limits()
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    doc = Document(uri=source.uri, mime=mime, title="probe")
    doc.add("p", f"time={limits.time_seconds:g} memory={'none' if soft == resource.RLIM_INFINITY else soft} "
                 f"file={limits.file_bytes} text={limits.text_chars} ocr={limits.ocr.enabled}")
    return doc
