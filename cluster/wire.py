"""What crosses the broker, as JSON: a file to convert (a Source and the limits to convert it
under) and what became of it (its Outcomes, the duplicate features the worker computed included);
a crawl's request to make, and the page it fetched.

JSON, not pickle: a message read from Redis is data, never code to run, so a worker or coordinator
that reads a forged message gets a bad document at worst. A Document travels as tagged text, which
round-trips exactly (converters/tagged.py); fingerprints as their catalog blob."""

from __future__ import annotations

import base64
import dataclasses
import math
from typing import Any

from deskdex.converters.convert import Outcome
from deskdex.converters.limits import Limits, OcrOptions
from deskdex.converters.source import Source
from deskdex.errors import DeskdexError
from deskdex.webcrawl.fetch import FetchSettings
from deskdex.webcrawl.frontier import Request
from deskdex.webcrawl.sink import FetchedPage, KnownPage


class BadMessage(DeskdexError):
    """A message from the broker that is not what deskdex sends."""


def source_to_wire(source: Source) -> dict[str, Any]:
    if source.run_as is not None:
        # A worker elsewhere cannot take a local account's rights; enterprise mode converts locally.
        raise ValueError("a file read with an account's rights is converted on this machine only")
    return {"uri": source.uri, "name": source.name, "path": source.path, "mime": source.mime,
            "depth": source.depth,
            "data": base64.b64encode(source.data).decode("ascii") if source.data is not None else None}


def source_from_wire(msg: dict[str, Any]) -> Source:
    try:
        data = msg.get("data")
        return Source(uri=str(msg["uri"]), name=str(msg["name"]),
                      path=None if msg.get("path") is None else str(msg["path"]),
                      data=base64.b64decode(data, validate=True) if data is not None else None,
                      mime=None if msg.get("mime") is None else str(msg["mime"]), depth=int(msg.get("depth", 0)))
    except (KeyError, TypeError, ValueError) as exc:
        raise BadMessage(f"not a file to convert: {exc}") from exc


def limits_to_wire(limits: Limits) -> dict[str, Any]:
    return dataclasses.asdict(limits)


def limits_from_wire(msg: dict[str, Any]) -> Limits:
    """Limits as sent; BadMessage unless every one is a finite number, not below 0, of its type
    (a limit of NaN or "1e9" would compare as no limit at all)."""
    try:
        fields = dict(msg)
        ocr = dict(fields.pop("ocr", {}))
        ocr["languages"] = tuple(str(x) for x in ocr.get("languages", ()))
        limits = Limits(**fields, ocr=OcrOptions(**ocr))
    except (TypeError, ValueError) as exc:
        raise BadMessage(f"not conversion limits: {exc}") from exc
    for owner in (limits, limits.ocr):
        for f in dataclasses.fields(owner):
            value, kind = getattr(owner, f.name), type(getattr(type(owner)(), f.name))
            if kind in (int, float) and not _a_number(value, kind):
                raise BadMessage(f"not conversion limits: {f.name} is {value!r}, not a number of 0 or more")
            if kind is bool and not isinstance(value, bool):
                raise BadMessage(f"not conversion limits: {f.name} is {value!r}, not true or false")
    return limits


def _a_number(value: Any, kind: type) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        return False
    return math.isfinite(value) and value >= 0


def outcomes_to_wire(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    from deskdex.converters import tagged
    from deskdex.index import fingerprints

    out = []
    for o in outcomes:
        item: dict[str, Any] = {"uri": o.uri, "reason": o.reason, "message": o.message,
                                "document": tagged.dumps(o.document) if o.document is not None else None}
        f = o.extra.get("features")
        if f is not None:
            item["features"] = {"group": f.group, "fp": f.fp,
                                "fps": base64.b64encode(fingerprints.to_blob(f.fps)).decode("ascii")}
        out.append(item)
    return out


def outcomes_from_wire(items: list[dict[str, Any]]) -> list[Outcome]:
    from deskdex.converters import tagged
    from deskdex.index import fingerprints
    from deskdex.index.features import Features

    out = []
    try:
        for item in items:
            o = Outcome(str(item["uri"]), reason=str(item.get("reason", "")), message=str(item.get("message", "")))
            if item.get("document") is not None:
                o.document = tagged.loads(item["document"])
            f = item.get("features")
            if f is not None:
                fps = fingerprints.from_blob(base64.b64decode(f["fps"], validate=True))
                o.extra["features"] = Features(f["group"], f["fp"], fps)
            out.append(o)
    except (KeyError, TypeError, ValueError, DeskdexError) as exc:
        raise BadMessage(f"not a conversion's outcome: {exc}") from exc
    if not out:
        raise BadMessage("a conversion's outcome with no document")
    return out


# -- crawling: a request to make, and what it gave -------------------------------------------------

def fetch_to_wire(req: Request, known: KnownPage | None, settings: FetchSettings, head_above: int,
                  delay: float, limits: Limits) -> dict[str, Any]:
    """One request of a crawl for a worker: the URL, what is known of it (for a conditional
    request), how to fetch, the site's delay (between the hops of one request), how to convert."""
    return {"url": req.url, "depth": req.depth, "kind": req.kind,
            "known": None if known is None else {"etag": known.etag, "last_modified": known.last_modified,
                                                 "fetched_at": known.fetched_at, "size": known.size},
            "fetch": dataclasses.asdict(settings), "head_above": head_above, "delay": delay,
            "limits": limits_to_wire(limits)}


@dataclasses.dataclass(slots=True)
class FetchTask:
    req: Request
    known: KnownPage | None
    settings: FetchSettings
    head_above: int
    delay: float
    limits: Limits


def fetch_from_wire(msg: dict[str, Any]) -> FetchTask:
    try:
        k = msg.get("known")
        known = None if k is None else KnownPage(
            str(msg["url"]), etag=_opt_str(k.get("etag")), last_modified=_opt_str(k.get("last_modified")),
            fetched_at=float(k["fetched_at"]), size=int(k["size"]))
        f = msg["fetch"]
        settings = FetchSettings(user_agent=str(f["user_agent"]), timeout=float(f["timeout"]),
                                 deadline=float(f["deadline"]), max_bytes=int(f["max_bytes"]),
                                 max_redirects=int(f["max_redirects"]), allow_private=bool(f["allow_private"]),
                                 dns_ttl=float(f["dns_ttl"]))
        return FetchTask(Request(str(msg["url"]), int(msg["depth"]), kind=str(msg["kind"])), known, settings,
                         int(msg["head_above"]), float(msg["delay"]), limits_from_wire(msg["limits"]))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BadMessage(f"not a request to fetch: {exc}") from exc


def page_to_wire(page: FetchedPage) -> dict[str, Any]:
    return {"url": page.url, "final_url": page.final_url, "status": page.status, "headers": page.headers,
            "body": base64.b64encode(page.body).decode("ascii"), "content_type": page.content_type,
            "fetched_at": page.fetched_at, "depth": page.depth, "charset": page.charset}


def page_from_wire(msg: dict[str, Any]) -> FetchedPage:
    try:
        return FetchedPage(url=str(msg["url"]), final_url=str(msg["final_url"]), status=int(msg["status"]),
                           headers={str(k): str(v) for k, v in dict(msg["headers"]).items()},
                           body=base64.b64decode(msg["body"], validate=True),
                           content_type=str(msg["content_type"]), fetched_at=float(msg["fetched_at"]),
                           depth=int(msg["depth"]), charset=_opt_str(msg.get("charset")))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BadMessage(f"not a fetched page: {exc}") from exc


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)
