"""OCR: the words in a picture of text, with Tesseract in this process (tesserocr).

One engine per converter process, made on first use and kept: loading a language's model costs
about 0.15 s, reading an A4 page at 300 dpi one to two seconds. tesserocr was measured against
pytesseract (a ``tesseract`` process per page, the page written out as PNG): 1.7 s against 2.6 s a
page, for the same words (docs/benchmarks.md).

What a converter gets is a ``Reader``: pages in, text out, under one file's time budget (the
``[ocr]`` settings, ``current_limits().ocr``). A page that would start past the budget is left and
counted (``left``); a page under way when the budget ends is cut short by Tesseract's own timeout.
Pictures are made ready for Tesseract first (``prepare``): grey, flattened on white, and scaled so
that text reaches the size Tesseract reads best (a page scanned at 150 dpi is read at 300).

Where OCR cannot run (tesserocr or the language data missing) ``unavailable`` says what to install;
converters then keep what they have and say so (``ocr: unavailable``), never pass it off as complete.
"""

from __future__ import annotations

import glob
import importlib.util
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from .limits import OcrOptions

if TYPE_CHECKING:
    from PIL.Image import Image

logger = logging.getLogger(__name__)

# Where Tesseract's language data is looked for when TESSDATA_PREFIX does not say (Debian and
# Ubuntu, Fedora, Homebrew, a source build).
TESSDATA_DIRS = ("/usr/share/tesseract-ocr/*/tessdata", "/usr/share/tessdata", "/usr/local/share/tessdata",
                 "/opt/homebrew/share/tessdata")
INSTALL_MODULE = "pip install tesserocr"
INSTALL_DATA = "apt install tesseract-ocr tesseract-ocr-eng (or dnf install tesseract-langpack-eng)"
# Pages are read at about this resolution: Tesseract reads best when capital letters are 20-40 pixels high.
TARGET_DPI = 300
# The most pixels one page is read at (a 300-dpi A3 page has 17 million): the picture and Tesseract's
# copies of it stay well inside the worker's memory limit. Larger pages are scaled down to it.
MAX_PIXELS = 36_000_000
MAX_SKEW = 5.0  # degrees of skew a page is levelled from (a scan fed askew; more is a photo of a page)
_SKEW_SIDE = 800  # pixels of the longer side of the copy the skew is measured on
_NOT_LANGUAGES = {"osd", "equ", "snum"}  # orientation, equations: data files that read no language


def tessdata() -> str | None:
    """The folder of Tesseract's ``*.traineddata`` files, or None when there is none."""
    env = os.environ.get("TESSDATA_PREFIX")
    candidates = [env, os.path.join(env, "tessdata")] if env else []
    for pattern in TESSDATA_DIRS:
        candidates.extend(sorted(glob.glob(pattern), reverse=True))  # the newest version first
    for path in candidates:
        if path and glob.glob(os.path.join(path, "*.traineddata")):
            return path
    return None


def installed_languages(path: str | None = None) -> list[str]:
    """The languages whose data is installed, English first."""
    path = path or tessdata()
    if path is None:
        return []
    names = sorted(os.path.basename(p)[: -len(".traineddata")] for p in glob.glob(os.path.join(path, "*.traineddata")))
    names = [n for n in names if n not in _NOT_LANGUAGES]
    return sorted(names, key=lambda n: n != "eng")


def languages(options: OcrOptions) -> list[str]:
    """The languages to read with: those asked for that are installed, else every one installed."""
    have = installed_languages()
    if options.languages:
        return [lang for lang in options.languages if lang in have]
    return have


def unavailable(options: OcrOptions) -> str:
    """Why OCR cannot run here, with what to install; "" when it can. Cheap: imports nothing."""
    if importlib.util.find_spec("tesserocr") is None:
        return f"the Python package tesserocr is not installed: {INSTALL_MODULE}"
    if tessdata() is None:
        return f"Tesseract's language data is not installed: {INSTALL_DATA}"
    if not languages(options):
        wanted = " ".join(f"tesseract-ocr-{lang}" for lang in options.languages)
        return f"none of the languages of ocr.languages is installed: apt install {wanted}"
    return ""


def state(options: OcrOptions) -> str:
    """OCR here in one line, for ``deskdex status``."""
    if not options.enabled:
        return "off (setting ocr.enabled)"
    why = unavailable(options)
    return f"unavailable: {why}" if why else f"on ({'+'.join(languages(options))})"


_engines: dict[tuple[str, str], Any] = {}


def _engine(path: str, lang: str) -> Any:
    """This process's Tesseract engine for ``lang``, made once."""
    api = _engines.get((path, lang))
    if api is None:
        import tesserocr

        api = tesserocr.PyTessBaseAPI(path=path, lang=lang)
        _engines[(path, lang)] = api
    return api


def prepare(im: Image, dpi: float | None = None) -> tuple[Image, int]:
    """``im`` as Tesseract reads it best, and its resolution then: 8-bit grey, transparency
    flattened on white, scaled so that a ``dpi`` below TARGET_DPI becomes TARGET_DPI (a picture
    without one is taken as it is, and as TARGET_DPI), and never more than MAX_PIXELS."""
    from PIL import Image as PILImage

    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        flat = PILImage.new("RGBA", rgba.size, (255, 255, 255, 255))
        flat.alpha_composite(rgba)
        im = flat
    if im.mode != "L":
        im = im.convert("L")
    scale = TARGET_DPI / dpi if dpi and 50 <= dpi < TARGET_DPI * 0.9 else 1.0
    w, h = im.size
    if w * h * scale * scale > MAX_PIXELS:
        scale = (MAX_PIXELS / (w * h)) ** 0.5
    if abs(scale - 1.0) > 0.05:
        im = im.resize((max(1, round(w * scale)), max(1, round(h * scale))), PILImage.Resampling.LANCZOS)
    angle = skew(im)
    if abs(angle) >= 0.2:
        im = im.rotate(angle, resample=PILImage.Resampling.BICUBIC, expand=True, fillcolor=255)
    return im, max(70, round((dpi or TARGET_DPI) * scale))


def skew(im: Image) -> float:
    """The rotation (degrees, counter-clockwise) that makes the lines of text in ``im`` level, within
    MAX_SKEW: the angle whose row profile of ink is the sharpest, found on a small copy. A page
    scanned 2 degrees askew loses whole blocks to Tesseract's layout analysis (the OCR benchmark
    lost half a page at 300 dpi); levelled, none. Pillow alone, about 0.1 s for an A4 page."""
    from PIL import Image as PILImage

    w, h = im.size
    f = min(1.0, _SKEW_SIDE / max(w, h))
    small = im.resize((max(1, round(w * f)), max(1, round(h * f))), PILImage.Resampling.BILINEAR) if f < 1 else im
    ink = small.point(lambda v: 255 if v < 128 else 0)
    if ink.resize((1, 1), PILImage.Resampling.BOX).tobytes()[0] < 1:  # under 0.4 % ink: nothing to level
        return 0.0
    rows = ink.height

    def sharpness(angle: float) -> float:
        profile = ink.rotate(angle, resample=PILImage.Resampling.NEAREST).resize((1, rows), PILImage.Resampling.BOX) \
            .tobytes()  # one byte a row: its share of ink
        return float(sum((b - a) ** 2 for a, b in zip(profile, profile[1:])))

    coarse = [i * 0.5 for i in range(int(-2 * MAX_SKEW), int(2 * MAX_SKEW) + 1)]
    best = max(coarse, key=sharpness)
    return max((best + i * 0.1 for i in range(-3, 4)), key=sharpness)


def blank(im: Image) -> bool:
    """A page of one colour (or nearly: a scanner's grey margin): nothing to read."""
    lo, hi = im.getextrema()[:2] if im.mode == "L" else im.convert("L").getextrema()[:2]
    return isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and hi - lo < 16


class Reader:
    """Reads the pages of one file under its OCR time budget (``options.seconds``, at most
    ``budget_cap``). ``read`` returns a page's text, or None once the budget is spent (the page is
    counted in ``left``); ``partial`` says whether any page was left or cut short."""

    def __init__(self, options: OcrOptions, budget_cap: float) -> None:
        self.options = options
        self.seconds = max(1.0, min(options.seconds, budget_cap))
        self.deadline = time.monotonic() + self.seconds
        self.pages = 0  # pages read (blank ones included)
        self.left = 0  # pages not read: the budget was spent
        self.cut = 0  # pages cut short by the budget
        path = tessdata()
        langs = languages(options)
        if path is None or not langs:
            raise RuntimeError(unavailable(options))
        self._api = _engine(path, "+".join(langs))

    @property
    def partial(self) -> bool:
        return bool(self.left or self.cut)

    def read(self, im: Image, dpi: float | None = None) -> str | None:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0.05:
            self.left += 1
            return None
        self.pages += 1
        im, resolution = prepare(im, dpi)
        if blank(im):
            return ""
        api = self._api
        api.SetImage(im)
        api.SetSourceResolution(resolution)
        if not api.Recognize(timeout=max(1, int(remaining * 1000))):
            self.cut += 1
            logger.info("OCR of a page stopped at the file's budget of %g s", self.seconds)
        text = str(api.GetUTF8Text() or "")
        api.Clear()
        return text

    def describe(self, meta: dict[str, str]) -> None:
        """Say in a document's metadata what OCR did."""
        meta["ocr"] = "partial" if self.partial else "yes"
        meta["ocr_pages"] = str(self.pages)
        if self.left:
            meta["ocr_pages_left"] = str(self.left)


def reader(options: OcrOptions, time_limit: float) -> Reader | str:
    """A Reader for one file, or why there is none: "off", or what to install."""
    if not options.enabled:
        return "off"
    why = unavailable(options)
    if why:
        return why
    try:
        return Reader(options, 0.75 * time_limit)
    except (ImportError, RuntimeError) as exc:  # a broken install: the module is there, the library is not
        return f"Tesseract cannot start: {exc}"
