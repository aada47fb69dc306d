"""The REST API's OpenAPI 3.1 description, built from the socket protocol's own table of ops and
arguments (deskdex.protocol.OPS), so the two cannot tell different stories."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from deskdex import protocol
from deskdex.version import version_line

# path -> (method, op, summary, the query parameters taken from the op's arguments: name in the URL -> argument)
ENDPOINTS: tuple[tuple[str, str, str, dict[str, str]], ...] = (
    ("/api/search", "get", "search", {"q": "query", "limit": "limit", "offset": "offset", "sort": "sort",
                                      "all": "all", "snippets": "snippets", "similar": "similar",
                                      "facets": "facets", "words": "words"}),
    ("/api/document", "get", "document", {"uri": "uri", "q": "query", "text": "text"}),
    ("/api/duplicates", "get", "duplicates", {"uri": "uri"}),
    ("/api/similar", "get", "search", {"uri": "similar", "limit": "limit"}),
    ("/api/status", "get", "status", {"failures": "failures"}),
    ("/api/watch", "get", "watch_list", {}),
    ("/api/exclude", "get", "exclude_list", {}),
    ("/api/pause", "post", "pause", {}),
    ("/api/resume", "post", "resume", {}),
)
JSON_TYPES = {str: "string", int: "integer", bool: "boolean", float: "number", list: "array", dict: "object"}


def _schema(arg: Any) -> dict[str, Any]:
    kind = JSON_TYPES.get(arg.kind, "string")
    schema: dict[str, Any] = {"type": [kind, "null"] if arg.nullable else kind}
    if kind == "boolean":  # in a URL: 1 or 0
        schema = {"type": "string", "enum": ["0", "1"]}
    if arg.minimum is not None:
        schema["minimum"] = arg.minimum
    if arg.maximum is not None:
        schema["maximum"] = arg.maximum
    if arg.choices:
        schema["enum"] = list(arg.choices)
    if arg.longest is not None:
        schema["maxLength"] = arg.longest
    if arg.default is not protocol.REQUIRED and arg.default is not None and kind != "boolean":
        schema["default"] = arg.default
    return schema


ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["code", "message"],
    "properties": {"code": {"type": "string", "enum": sorted([*protocol.ERRORS, "unauthenticated"])},
                   "message": {"type": "string"},
                   "position": {"type": "integer", "description": "bad_query: where in the query"}}}}}


@lru_cache(maxsize=1)
def openapi() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for path, method, name, params in ENDPOINTS:
        op = protocol.OPS.get(name)
        if op is None:
            continue
        parameters = [{"name": url_name, "in": "query", "required": op.args[arg].default is protocol.REQUIRED
                       and url_name != "q", "description": op.args[arg].doc, "schema": _schema(op.args[arg])}
                      for url_name, arg in params.items() if arg in op.args]
        paths.setdefault(path, {})[method] = {
            "summary": op.doc.split(". ")[0], "description": op.doc, "operationId": f"{method}_{path[5:]}",
            "parameters": parameters,
            "responses": {"200": {"description": "the op's answer, as over the socket (docs/protocol.md)",
                                  "content": {"application/json": {"schema": {"type": "object"}}}},
                          "default": {"description": "an error, with the socket's code",
                                      "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}}}
    for path, key in (("/api/watch", "path"), ("/api/exclude", "pattern")):
        paths[path]["post"] = {
            "summary": f"add (or with remove: true, remove) a {key}", "operationId": f"post_{path[5:]}",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": [key],
                "properties": {key: {"type": "string"}, "remove": {"type": "boolean"}}}}}},
            "responses": {"200": {"description": f"as GET {path}"},
                          "default": {"description": "an error", "content": {"application/json": {
                              "schema": {"$ref": "#/components/schemas/Error"}}}}}}
    paths["/api/login"] = {"post": {
        "summary": "the system daemon: log in with the account's password; sets the session cookie",
        "operationId": "post_login",
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "required": ["user", "password"],
            "properties": {"user": {"type": "string"}, "password": {"type": "string"}}}}}},
        "responses": {"200": {"description": "{user, uid, csrf}: send csrf as X-CSRF-Token with every POST"},
                      "401": {"description": "wrong name or password"}, "429": {"description": "too many failures"}}}}
    paths["/api/logout"] = {"post": {
        "summary": "end the session (the system daemon) or forget the token's cookie", "operationId": "post_logout",
        "responses": {"200": {"description": "{ok: true}"},
                      "default": {"description": "an error", "content": {"application/json": {
                          "schema": {"$ref": "#/components/schemas/Error"}}}}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "deskdex", "version": version_line().removeprefix("deskdex "),
                 "description": "The search API of a deskdex daemon (docs/web.md). Authenticate with the desktop "
                                "token (Authorization: Bearer TOKEN) or, on the system daemon, the session cookie "
                                "of /api/login; every POST carries X-CSRF-Token."},
        "paths": paths,
        "components": {"schemas": {"Error": ERROR}},
    }
