"""What crosses the broker, as JSON: a file to convert (a Source and the limits to convert it
under) and what became of it (its Outcomes, the duplicate features the worker computed included).

JSON, not pickle: a message read from Redis is data, never code to run, so a worker or coordinator
that reads a forged message gets a bad document at worst. A Document travels as tagged text, which
round-trips exactly (converters/tagged.py); fingerprints as their catalog blob."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from deskdex.converters.convert import Outcome
from deskdex.converters.limits import Limits, OcrOptions
from deskdex.converters.source import Source
from deskdex.errors import DeskdexError


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
    try:
        fields = dict(msg)
        ocr = dict(fields.pop("ocr", {}))
        ocr["languages"] = tuple(ocr.get("languages", ()))
        return Limits(**fields, ocr=OcrOptions(**ocr))
    except (TypeError, ValueError) as exc:
        raise BadMessage(f"not conversion limits: {exc}") from exc


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
