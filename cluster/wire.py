"""What crosses the broker, as JSON: a file to convert (a Source and the limits to convert it
under) and what became of it (its Outcomes, the duplicate features the worker computed included);
a crawl's request to make, and the page it fetched.

JSON, not pickle: a message read from Redis is data, never code to run, so a worker or coordinator
that reads a forged message gets a bad document at worst. A Document travels as tagged text, which
round-trips exactly (converters/tagged.py); fingerprints as their catalog blob. Each message is
checked against its schema (deskdex.wire) before anything is made of it: one that does not fit is
one BadMessage naming the message, the field and why."""

from __future__ import annotations

import base64
import dataclasses
import math
from typing import Any

from deskdex import wire
from deskdex.converters import Limits, OcrOptions, Outcome, Source
from deskdex.errors import BadMessage, DeskdexError
from deskdex.webcrawl import FetchSettings, FetchedPage, KnownPage, Request

__all__ = ["BadMessage"]  # deskdex.errors' (code bad_message), where this module's callers look for it


def source_to_wire(source: Source) -> dict[str, Any]:
    if source.run_as is not None:
        # A worker elsewhere cannot take a local account's rights; enterprise mode converts locally.
        raise ValueError("a file read with an account's rights is converted on this machine only")
    return {"uri": source.uri, "name": source.name, "path": source.path, "mime": source.mime,
            "depth": source.depth,
            "data": base64.b64encode(source.data).decode("ascii") if source.data is not None else None}


def source_from_wire(msg: Any) -> Source:
    return source_from_message(wire.convert(msg, wire.SourceMessage, "not a file to convert"))


def source_from_message(m: wire.SourceMessage) -> Source:
    return Source(uri=m.uri, name=m.name, path=m.path, data=m.data, mime=m.mime, depth=m.depth)


def limits_to_wire(limits: Limits) -> dict[str, Any]:
    return dataclasses.asdict(limits)


def limits_from_wire(msg: Any) -> Limits:
    """Limits as sent; BadMessage unless every one is a finite number, not below 0, of its type
    (a limit of NaN or "1e9" would compare as no limit at all), and none is unknown."""
    what = "not conversion limits"
    fields = wire.convert(msg, dict[str, Any], what)
    _known(fields, Limits, what, "$")
    _known(wire.convert(fields.get("ocr", {}), dict[str, Any], what), OcrOptions, what, "$.ocr")
    limits = wire.convert(fields, Limits, what)
    for owner, at in ((limits, "$"), (limits.ocr, "$.ocr")):
        for f in dataclasses.fields(owner):
            value, kind = getattr(owner, f.name), type(getattr(type(owner)(), f.name))
            if kind in (int, float) and not _a_number(value, kind):
                raise BadMessage(f"{what}: {value!r} is not a number of 0 or more - at `{at}.{f.name}`")
    return limits


def _known(fields: dict[str, Any], kind: type, what: str, at: str) -> None:
    """BadMessage for a field ``kind`` (a dataclass) does not have: msgspec ignores them."""
    unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(kind)})
    if unknown:
        raise BadMessage(f"{what}: Object contains unknown field `{unknown[0]}` - at `{at}`")


def _a_number(value: Any, kind: type) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        return False
    return math.isfinite(value) and value >= 0


def outcomes_to_wire(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = wire.to_builtins(outcome_messages(outcomes))
    return result


def outcome_messages(outcomes: list[Outcome]) -> list[wire.OutcomeMessage]:
    from deskdex.converters import tagged
    from deskdex.index import fingerprints

    out = []
    for o in outcomes:
        f = o.extra.get("features")
        out.append(wire.OutcomeMessage(
            uri=o.uri, reason=o.reason, message=o.message,
            document=tagged.dumps(o.document) if o.document is not None else None,
            features=None if f is None else wire.FeaturesMessage(f.group, f.fp, fingerprints.to_blob(f.fps))))
    return out


def outcomes_from_wire(items: Any) -> list[Outcome]:
    return outcomes_from_messages(wire.convert(items, list[wire.OutcomeMessage], "not a conversion's outcome"))


def outcomes_from_messages(items: list[wire.OutcomeMessage]) -> list[Outcome]:
    """The outcomes a worker sent, their documents and fingerprints read: BadMessage naming the one
    that is not a document or not fingerprints."""
    from deskdex.converters import tagged
    from deskdex.index import Features, fingerprints

    what = "not a conversion's outcome"
    out = []
    for i, item in enumerate(items):
        o = Outcome(item.uri, reason=item.reason, message=item.message)
        try:
            if item.document is not None:
                o.document = tagged.loads(item.document)
        except (ValueError, DeskdexError) as exc:
            raise BadMessage(f"{what}: {exc} - at `$[{i}].document`") from exc
        f = item.features
        if f is not None:
            try:
                fps = fingerprints.from_blob(f.fps)
            except (ValueError, DeskdexError) as exc:
                raise BadMessage(f"{what}: {exc} - at `$[{i}].features.fps`") from exc
            o.extra["features"] = Features(f.group, f.fp, fps)
        out.append(o)
    if not out:
        raise BadMessage(f"{what}: no outcome at all - at `$`")
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


def fetch_from_wire(msg: Any) -> FetchTask:
    return fetch_from_message(wire.convert(msg, wire.FetchMessage, "not a request to fetch"))


def fetch_from_message(m: wire.FetchMessage) -> FetchTask:
    k, f = m.known, m.fetch
    known = None if k is None else KnownPage(m.url, etag=k.etag, last_modified=k.last_modified,
                                             fetched_at=k.fetched_at, size=k.size)
    settings = FetchSettings(user_agent=f.user_agent, timeout=f.timeout, deadline=f.deadline, max_bytes=f.max_bytes,
                             max_redirects=f.max_redirects, allow_private=f.allow_private, dns_ttl=f.dns_ttl)
    try:
        limits = limits_from_wire(m.limits)
    except BadMessage as exc:
        raise BadMessage(f"not a request to fetch: the limits: {exc}") from exc
    return FetchTask(Request(m.url, m.depth, kind=m.kind), known, settings, m.head_above, m.delay, limits)


def page_to_wire(page: FetchedPage) -> dict[str, Any]:
    result: dict[str, Any] = wire.to_builtins(page_message(page))
    return result


def page_message(page: FetchedPage) -> wire.PageMessage:
    return wire.PageMessage(url=page.url, final_url=page.final_url, status=page.status, headers=page.headers,
                            body=page.body, content_type=page.content_type, fetched_at=page.fetched_at,
                            depth=page.depth, charset=page.charset)


def page_from_wire(msg: Any) -> FetchedPage:
    return page_from_message(wire.convert(msg, wire.PageMessage, "not a fetched page"))


def page_from_message(m: wire.PageMessage) -> FetchedPage:
    return FetchedPage(url=m.url, final_url=m.final_url, status=m.status, headers=m.headers, body=m.body,
                       content_type=m.content_type, fetched_at=m.fetched_at, depth=m.depth, charset=m.charset)
