"""What every converter worker needs, imported once by the fork server before it forks any
(isolation.py): a worker then starts converting in tens of milliseconds rather than half a second
of imports, and the modules' pages are shared by all workers instead of copied into each.

Only what small text and web pages need (the bulk of a home folder): a format's own library
(PDFium, python-docx...) is imported by the first worker that meets one, so an idle fork server
stays small. A failure here costs only the sharing: the workers import what they need themselves.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

try:
    import lxml.html  # noqa: F401
    import trafilatura  # noqa: F401

    from . import content, convert, html, language, markup, plaintext, registry  # noqa: F401

    content._extractor(fast=True)
    content._extractor(fast=False)
    language._model()
except Exception:  # noqa: BLE001  (the fork server must start whatever goes wrong here)
    logger.exception("preloading the converters failed: each worker imports them itself")
