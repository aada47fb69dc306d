"""The web UI and its REST API: a Starlette application that answers every request through the
daemon's own ops (``Backend.call``, which is ``daemon.server.Server.call``), as the account the
request is authenticated as. What a page shows is what ``deskdex search`` shows that account
through the socket: the same filtering, refusals, limits and error codes.

Pages are rendered on the server (Jinja2, autoescaped: a file name or a document's text holding
HTML is shown as text) and work without JavaScript; static/app.js adds search as you type, keyboard
use and the preview's hit navigation by fetching the same fragments. Nothing is fetched from
another origin (the Content-Security-Policy says so to the browser).
"""

from __future__ import annotations

import base64
import json
import math
import os
import time
import urllib.parse
from dataclasses import dataclass
from importlib import resources
from typing import Any, AsyncIterator, Awaitable, BinaryIO, Callable, Protocol

import anyio
import jinja2
from markupsafe import Markup, escape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from deskdex import protocol
from deskdex.converters import RunAs, as_user, open_regular
from deskdex.errors import BadArgs, DeskdexError, Forbidden, NotFound, QueryError, TooLarge, UnreadableFile
from deskdex.index import narrowed, prefix_last_word
from deskdex.sizes import human

from .auth import Account, LoginLimiter, Session, Sessions, check_password, same_secret
from .openapi import openapi

PAGE_SIZE = 20
MAX_PAGE = protocol.MAX_LIMIT // PAGE_SIZE  # the socket's offset bound, in pages
MAX_BODY = 64 * 1024  # a form or an API call's JSON: far above any we take, far below harm
MAX_URI = 8192
CHUNK = 256 * 1024
SESSION_COOKIE, TOKEN_COOKIE = "deskdex_session", "deskdex_token"
# Shown inline by the browser (the preview's "open at page" for PDFs); anything else is a download,
# so that an indexed HTML or SVG file cannot run script on this origin.
INLINE_TYPES = {"application/pdf", "image/png", "image/jpeg", "image/gif", "image/webp", "text/plain"}
HTTP_STATUS = {"bad_query": 400, "bad_args": 400, "bad_request": 400, "too_large": 413, "forbidden": 403,
               "not_found": 404, "busy": 429, "unknown_op": 404, "unauthenticated": 401}
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    # same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" with a form POST,
    # which the origin check refuses (no login or logout from the page); other origins still get nothing.
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


class Backend(Protocol):
    def call(self, op: str, args: dict[str, Any], account: Account) -> Any: ...


@dataclass(frozen=True, slots=True)
class Options:
    """How the web UI is served: ``system``: accounts log in with their password (PAM); else the
    owner opens it with ``token``."""

    system: bool
    token: str
    session_hours: float
    pam_service: str
    tls: bool  # served over HTTPS itself (not behind a proxy)
    threads: int = 4  # ops run at once for the web: each holds a reader of the index


class Unauthenticated(DeskdexError):
    code = "unauthenticated"
    shown_to_anyone = True


class _Refused(Exception):
    """A request stopped before any op: its response is ready."""

    def __init__(self, response: Response) -> None:
        self.response = response


class WebApp:
    def __init__(self, backend: Backend, options: Options, on_login: Callable[[str], None] | None = None) -> None:
        self.backend, self.options = backend, options
        self.sessions = Sessions(options.session_hours * 3600)
        self.limiter = LoginLimiter()
        self.owner = Account.of_uid(os.getuid())
        self.limit = anyio.CapacityLimiter(options.threads)
        self.logins = anyio.CapacityLimiter(2)  # PAM waits seconds on a failure: never all threads
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(resources.files(__package__) / "templates")),
            autoescape=True, trim_blocks=True, lstrip_blocks=True)
        self.templates.filters.update(human_size=human_size, when=when, marked=marked, query_with=query_with,
                                      indexing_said=protocol.indexing_said)
        static = str(resources.files(__package__) / "static")
        self.app = Starlette(routes=[
            Route("/", self.page_search), Route("/results", self.page_results), Route("/facets", self.page_facets),
            Route("/doc", self.page_doc),
            Route("/file", self.page_file), Route("/status", self.page_status, methods=["GET", "POST"]),
            Route("/login", self.page_login, methods=["GET", "POST"]), Route("/logout", self.logout, methods=["POST"]),
            Route("/api/login", self.api_login, methods=["POST"]),
            Route("/api/logout", self.logout, methods=["POST"]),
            Route("/api/openapi.json", self.api_openapi),
            Route("/api/search", self.api_search), Route("/api/document", self.api_document),
            Route("/api/duplicates", self.api_duplicates), Route("/api/similar", self.api_similar),
            Route("/api/status", self.api_status),
            Route("/api/watch", self.api_watch, methods=["GET", "POST"]),
            Route("/api/exclude", self.api_exclude, methods=["GET", "POST"]),
            Route("/api/pause", self.api_pause, methods=["POST"]), Route("/api/resume", self.api_resume, methods=["POST"]),
            # follow_symlink: an editable install links each file from elsewhere; the folder is ours, read-only
            Mount("/static", StaticFiles(directory=static, follow_symlink=True)),
        ])
        self.app.add_middleware(_Headers)

    # -- who asks ----------------------------------------------------------------------------------
    def session_of(self, request: Request) -> Session | None:
        if self.options.system:
            return self.sessions.get(request.cookies.get(SESSION_COOKIE))
        bearer = request.headers.get("authorization", "")
        token = bearer[7:] if bearer.lower().startswith("bearer ") else request.cookies.get(TOKEN_COOKIE)
        if same_secret(token, self.options.token):
            # The owner's one session: its CSRF token is derived from the token, so every tab has it.
            return Session("owner", self.owner, _derive(self.options.token, "csrf"), math.inf)
        return None

    def require(self, request: Request, api: bool) -> Session:
        s = self.session_of(request)
        if s is not None:
            return s
        if api:
            raise _Refused(error_response(Unauthenticated("log in first" if self.options.system else
                                                          "the token is missing or wrong: open the URL "
                                                          "`deskdex web` prints"), anyone=True))
        if self.options.system:
            raise _Refused(RedirectResponse("/login?next=" + urllib.parse.quote(_local_target(request)), 303))
        raise _Refused(self.render("denied.html", None, code=401))

    def check_post(self, request: Request, session: Session | None, form: dict[str, str]) -> None:
        """A state-changing request: from this origin (Origin, else Referer, when the browser sends
        one) and, with a session, carrying its CSRF token. A cross-site form or fetch fails both."""
        origin = request.headers.get("origin") or _origin_of(request.headers.get("referer", ""))
        if origin and origin != _own_origin(request):
            raise _Refused(error_response(Forbidden(f"a request from {origin} may not act here"), anyone=False))
        if session is not None:
            given = request.headers.get("x-csrf-token") or form.get("csrf")
            if not same_secret(given, session.csrf):
                raise _Refused(error_response(Forbidden("the request's CSRF token is missing or wrong: reload "
                                                         "the page"), anyone=False))

    async def call(self, session: Session, op: str, **args: Any) -> Any:
        return await anyio.to_thread.run_sync(self.backend.call, op, args, session.account, limiter=self.limit)

    def anyone(self, session: Session | None) -> bool:
        return self.options.system and (session is None or session.account.uid != 0)

    def render(self, name: str, session: Session | None, code: int = 200, **values: Any) -> HTMLResponse:
        html = self.templates.get_template(name).render(session=session, system=self.options.system,
                                                       owner_ops=session is not None and self.may_manage(session),
                                                       **values)
        return HTMLResponse(html, status_code=code)

    def may_manage(self, session: Session) -> bool:
        return not self.options.system or session.account.uid == 0

    # -- pages ---------------------------------------------------------------------------------------
    async def page_search(self, request: Request) -> Response:
        if not self.options.system and "token" in request.query_params:
            return self.take_token(request)
        try:
            session = self.require(request, api=False)
        except _Refused as r:
            return r.response
        values = await self.results_values(request, session)
        return self.render("search.html", session, **values)

    async def page_results(self, request: Request) -> Response:
        try:
            session = self.require(request, api=False)
        except _Refused as r:
            return r.response
        # The script's fragment: the hits first, the facets in a second request after they are shown
        # (counting 1,000 matches costs about as much as the search itself).
        values = await self.results_values(request, session, facets=False)
        return self.render("results.html", session, facets_later=values["similar"] is None, **values)

    async def page_facets(self, request: Request) -> Response:
        try:
            session = self.require(request, api=False)
        except _Refused as r:
            return r.response
        p = request.query_params
        q = p.get("q", "")[: protocol.MAX_QUERY + 1]
        sort = p.get("sort", "relevance")
        try:
            results = await self.call(session, "search", query=q, limit=1, snippets=False, facets=True,
                                      sort=sort if sort in protocol.SORTS else "relevance")
        except DeskdexError:
            return HTMLResponse("")  # the hits' request shows the error
        return self.render("facets.html", session, results=results, q=q, sort=sort)

    async def results_values(self, request: Request, session: Session, facets: bool = True) -> dict[str, Any]:
        p = request.query_params
        q = p.get("q", "")[: protocol.MAX_QUERY + 1]
        sort = p.get("sort", "relevance")
        sort = sort if sort in protocol.SORTS else "relevance"
        page = _bounded_int(p.get("page"), 1, 1, MAX_PAGE)
        similar = p.get("similar") or None
        words = p.get("words") == "1"  # by the words alone: no documents related by meaning
        values: dict[str, Any] = {"q": q, "sort": sort, "page": page, "sorts": protocol.SORTS, "similar": similar,
                                  "words": words, "results": None, "error": None, "pages": 0, "took_ms": None}
        if not q.strip() and not similar:
            return values
        # While typing (the script's searches as you type), the unfinished last word also matches as a
        # prefix, as in the tray: `zep` finds zephyr.
        query = prefix_last_word(q) if p.get("typing") == "1" else q
        started = time.perf_counter()
        try:
            results = await self.call(session, "search", query=query, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE,
                                       sort=sort, snippets=True, facets=facets and similar is None, similar=similar,
                                       words=words)
        except DeskdexError as exc:
            values["error"] = protocol.error_object(exc, self.anyone(session))
            return values
        values.update(results=results, pages=min(MAX_PAGE, math.ceil(results["total"] / PAGE_SIZE)),
                      took_ms=round((time.perf_counter() - started) * 1000, 1))
        return values

    async def page_doc(self, request: Request) -> Response:
        try:
            session = self.require(request, api=False)
            uri = _uri_param(request)
        except _Refused as r:
            return r.response
        q = request.query_params.get("q", "")[: protocol.MAX_QUERY + 1]
        try:
            doc = await self.call(session, "document", uri=uri, query=q, text=True)
        except QueryError:  # the preview still shows the document, without marks
            doc = await self.call(session, "document", uri=uri, query="", text=True)
        except DeskdexError as exc:
            error = protocol.error_object(exc, self.anyone(session))
            return self.render("error.html", session, code=HTTP_STATUS.get(error["code"], 500), error=error)
        # A file of its own, or a document of a mail account or share (whose download is the
        # original its server holds: a message's attachment downloads the whole message).
        downloadable = doc["source"] in protocol.REMOTE_SOURCES or doc["source"] != "web" and "#" not in doc["uri"]
        return self.render("doc.html", session, doc=doc, q=q, downloadable=downloadable,
                           inline=doc["mime"] in INLINE_TYPES and doc["source"] not in protocol.REMOTE_SOURCES)

    async def page_file(self, request: Request) -> Response:
        """The original file, opened with the caller's rights: its path is the index's, found by the
        URI, never taken from the request; an archive's member is not a file of its own."""
        try:
            session = self.require(request, api=False)
            uri = _uri_param(request)
        except _Refused as r:
            return r.response
        try:
            doc = await self.call(session, "document", uri=uri, text=False)
            if doc["source"] in protocol.REMOTE_SOURCES:
                original = await self.call(session, "original", uri=uri)
                data = base64.b64decode(original["data"])
                return Response(data, media_type="application/octet-stream",
                                headers=_download_headers(original["name"], False, len(data)))
            if "#" in doc["uri"] or not doc["path"]:
                raise NotFound("no such file: a member of an archive or a web page is shown, not downloaded")
            f = await anyio.to_thread.run_sync(_open_as, doc["path"], session.account, self.options.system,
                                               limiter=self.limit)
        except DeskdexError as exc:
            return error_response(exc, self.anyone(session))
        size = os.fstat(f.fileno()).st_size
        mime = doc["mime"] or "application/octet-stream"
        inline = request.query_params.get("inline") == "1" and mime in INLINE_TYPES
        headers = _download_headers(os.path.basename(doc["path"]), inline, size)
        return StreamingResponse(_read_chunks(f, size), media_type=mime if inline else "application/octet-stream",
                                 headers=headers)

    async def page_status(self, request: Request) -> Response:
        try:
            session = self.require(request, api=False)
            message = None
            if request.method == "POST":
                form = await _form(request)
                self.check_post(request, session, form)
                message = await self.manage(session, form)
        except _Refused as r:
            return r.response
        except DeskdexError as exc:
            message = protocol.error_object(exc, self.anyone(session))["message"]
        status = await self.call(session, "status", failures=False)
        watched = excludes = None
        if self.may_manage(session):
            watched = (await self.call(session, "watch_list"))["folders"]
            excludes = (await self.call(session, "exclude_list"))["exclude"]
        return self.render("status.html", session, status=status, watched=watched, excludes=excludes, message=message)

    async def manage(self, session: Session, form: dict[str, str]) -> str:
        action, value = form.get("action", ""), form.get("value", "").strip()
        ops = {"pause": ("pause", {}), "resume": ("resume", {}), "watch_add": ("watch_add", {"path": value}),
               "watch_remove": ("watch_remove", {"path": value}), "exclude_add": ("exclude_add", {"pattern": value}),
               "exclude_remove": ("exclude_remove", {"pattern": value})}
        if action not in ops:
            return f"unknown action {action!r}"
        op, args = ops[action]
        await self.call(session, op, **args)
        return f"done: {action.replace('_', ' ')} {value}".strip()

    def take_token(self, request: Request) -> Response:
        """The desktop's first visit: the URL's token becomes a cookie, and the token leaves the
        address bar (and the history) by a redirect that keeps the rest of the address: the
        desktop's "show all" (clients/shellsearch.py) opens ``/?token=...&q=...``."""
        token = request.query_params.get("token", "")
        if not same_secret(token, self.options.token):
            return self.render("denied.html", None, code=401)
        rest = urllib.parse.urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
        response = RedirectResponse("/" + (f"?{rest}" if rest else ""), 303)
        # Secure only over TLS: a user's daemon serves plain HTTP on 127.0.0.1, where a client other
        # than a browser (which counts loopback as secure) would not send a Secure cookie back.
        response.set_cookie(TOKEN_COOKIE, token, max_age=int(self.options.session_hours * 3600), httponly=True,
                            samesite="strict", secure=self.options.tls, path="/")
        return response

    async def page_login(self, request: Request) -> Response:
        if not self.options.system:
            return RedirectResponse("/", 303)
        target = _safe_next(request.query_params.get("next", "/"))
        if request.method == "GET":
            return self.render("login.html", None, next=target, error=None, user="")
        try:
            form = await _form(request)
            self.check_post(request, None, form)
        except _Refused as r:
            return r.response
        user, password = form.get("user", "")[:256], form.get("password", "")
        session, error = await self.log_in(request, user, password)
        if session is None:
            return self.render("login.html", None, code=401 if "wait" not in error else 429,
                               next=_safe_next(form.get("next", "/")), error=error, user=user)
        response = RedirectResponse(_safe_next(form.get("next", "/")), 303)
        self.set_session_cookie(response, session)
        return response

    async def log_in(self, request: Request, user: str, password: str) -> tuple[Session | None, str]:
        address = request.client.host if request.client else "?"
        wait = self.limiter.wait(user, address)
        if wait > 0:
            return None, f"too many failed logins: wait {math.ceil(wait)} s"
        account = await anyio.to_thread.run_sync(check_password, self.options.pam_service, user, password,
                                                 limiter=self.logins)
        if account is None:
            self.limiter.failed(user, address)
            return None, "wrong name or password"
        self.limiter.succeeded(user)
        return self.sessions.create(account), ""

    def set_session_cookie(self, response: Response, session: Session) -> None:
        # Always Secure: the system daemon serves HTTPS, or plain HTTP on loopback behind a TLS proxy
        # (browsers count http://127.0.0.1 as secure too).
        response.set_cookie(SESSION_COOKIE, session.sid, httponly=True, samesite="strict", secure=True, path="/")

    async def logout(self, request: Request) -> Response:
        session = self.session_of(request)
        try:
            self.check_post(request, session, await _form(request))
        except _Refused as r:
            return r.response
        response: Response
        if request.url.path.startswith("/api/"):
            response = JSONResponse({"ok": True})
        else:
            response = RedirectResponse("/login" if self.options.system else "/", 303)
        if self.options.system:
            self.sessions.end(request.cookies.get(SESSION_COOKIE))
            response.delete_cookie(SESSION_COOKIE, path="/")
        else:
            response.delete_cookie(TOKEN_COOKIE, path="/")
        return response

    # -- the REST API ------------------------------------------------------------------------------
    async def api(self, request: Request, work: Callable[[Session], Awaitable[Any]], post: bool = False) -> Response:
        session = None
        try:
            session = self.require(request, api=True)
            if post or request.method == "POST":
                self.check_post(request, session, {})
            return JSONResponse(await work(session))
        except _Refused as r:
            return r.response
        except DeskdexError as exc:
            return error_response(exc, self.anyone(session))

    async def api_login(self, request: Request) -> Response:
        if not self.options.system:
            return error_response(BadArgs("this daemon takes its token, not a login"), anyone=False)
        try:
            self.check_post(request, None, {})
            body = await _json_body(request)
        except _Refused as r:
            return r.response
        except DeskdexError as exc:
            return error_response(exc, anyone=True)
        session, error = await self.log_in(request, str(body.get("user", ""))[:256], str(body.get("password", "")))
        if session is None:
            return error_response(Unauthenticated(error), anyone=True, status=429 if "wait" in error else 401)
        response = JSONResponse({"user": session.account.name, "uid": session.account.uid, "csrf": session.csrf})
        self.set_session_cookie(response, session)
        return response

    async def api_openapi(self, request: Request) -> Response:
        async def work(s: Session) -> Any:
            return openapi()
        return await self.api(request, work)

    async def api_search(self, request: Request) -> Response:
        p = request.query_params

        async def work(s: Session) -> Any:
            return await self.call(s, "search", query=p.get("q", ""), limit=_int(p, "limit", 10),
                                   offset=_int(p, "offset", 0), sort=p.get("sort", "relevance"),
                                   snippets=p.get("snippets", "1") != "0", facets=p.get("facets") == "1",
                                   all=p.get("all") == "1", similar=p.get("similar") or None,
                                   words=p.get("words") == "1")
        return await self.api(request, work)

    async def api_document(self, request: Request) -> Response:
        p = request.query_params

        async def work(s: Session) -> Any:
            return await self.call(s, "document", **_given(p, uri="uri"), query=p.get("q", ""),
                                   text=p.get("text", "1") != "0")
        return await self.api(request, work)

    async def api_duplicates(self, request: Request) -> Response:
        async def work(s: Session) -> Any:
            return await self.call(s, "duplicates", **_given(request.query_params, uri="uri"))
        return await self.api(request, work)

    async def api_similar(self, request: Request) -> Response:
        p = request.query_params

        async def work(s: Session) -> Any:
            if "uri" not in p:
                raise BadArgs("uri: the URI of an indexed document is required")
            return await self.call(s, "search", query="", similar=p["uri"], limit=_int(p, "limit", 20),
                                   snippets=False)
        return await self.api(request, work)

    async def api_status(self, request: Request) -> Response:
        async def work(s: Session) -> Any:
            return await self.call(s, "status", failures=request.query_params.get("failures") == "1")
        return await self.api(request, work)

    async def api_watch(self, request: Request) -> Response:
        return await self.api_list(request, "watch_list", "watch_add", "watch_remove", "path")

    async def api_exclude(self, request: Request) -> Response:
        return await self.api_list(request, "exclude_list", "exclude_add", "exclude_remove", "pattern")

    async def api_list(self, request: Request, listing: str, add: str, remove: str, key: str) -> Response:
        async def work(s: Session) -> Any:
            if request.method == "GET":
                return await self.call(s, listing)
            body = await _json_body(request)
            return await self.call(s, remove if body.get("remove") else add, **{key: body.get(key)})
        return await self.api(request, work)

    async def api_pause(self, request: Request) -> Response:
        return await self.api(request, lambda s: self.call(s, "pause"), post=True)

    async def api_resume(self, request: Request) -> Response:
        return await self.api(request, lambda s: self.call(s, "resume"), post=True)



class _Headers:
    """The security headers on every response (a file download sets its own, stricter CSP)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                have = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k.encode() not in have]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)
        await self.app(scope, receive, send_with_headers)


def error_response(exc: DeskdexError, anyone: bool, status: int | None = None) -> JSONResponse:
    """The socket's error object; the web's own refusals (bad form, foreign origin, no login) carry
    nothing private, so their messages are shown to anyone."""
    if isinstance(exc, Unauthenticated):
        error = {"code": exc.code, "message": str(exc)}
    else:
        error = protocol.error_object(exc, anyone)
    return JSONResponse({"error": error}, status_code=status or HTTP_STATUS.get(error["code"], 500))


def _download_headers(name: str, inline: bool, size: int) -> dict[str, str]:
    disposition = ("inline" if inline else "attachment") + "; filename*=UTF-8''" + urllib.parse.quote(
        (name or "download").encode("utf-8", "surrogateescape"))
    return {"content-disposition": disposition, "content-length": str(size),
            # whatever the file holds, it runs nothing on this origin
            "content-security-policy": "sandbox; default-src 'none'; style-src 'unsafe-inline'; "
                                       "img-src 'self' data:; object-src 'self'; plugin-types application/pdf"}


def _open_as(path: str, account: Account, system: bool) -> BinaryIO:
    """``path`` opened for reading with ``account``'s rights (the system daemon runs as root; a
    user's daemon already has its owner's), as every file is opened (converters.open_regular): a
    symlink at the end is not followed, a FIFO or device is not read, and either is answered as a
    file that is not there."""
    who = RunAs(account.uid, account.gid, account.groups or (account.gid,)) if system and account.uid != 0 else None
    try:
        with as_user(who):
            return open_regular(path, nofollow=True)
    except UnreadableFile as exc:
        raise NotFound(f"cannot read the file: {exc}") from None


async def _read_chunks(f: BinaryIO, size: int) -> AsyncIterator[bytes]:
    """The file's first ``size`` bytes (as Content-Length said, even if it grows meanwhile)."""
    try:
        left = size
        while left > 0:
            chunk = await anyio.to_thread.run_sync(f.read, min(CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            yield chunk
    finally:
        f.close()


async def _body(request: Request) -> bytes:
    if int(request.headers.get("content-length") or 0) > MAX_BODY:
        raise _Refused(error_response(TooLarge(f"a request body is at most {MAX_BODY} bytes"), anyone=False))
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY:
            raise _Refused(error_response(TooLarge(f"a request body is at most {MAX_BODY} bytes"), anyone=False))
    return bytes(data)



async def _form(request: Request) -> dict[str, str]:
    if request.method != "POST":
        return {}
    data = await _body(request)
    if "application/x-www-form-urlencoded" not in request.headers.get("content-type", ""):
        return {}
    return dict(urllib.parse.parse_qsl(data.decode("utf-8", "replace"), max_num_fields=50))


async def _json_body(request: Request) -> dict[str, Any]:
    data = await _body(request)
    try:
        value = json.loads(data or b"{}")
    except ValueError:
        raise BadArgs("the request body is not JSON") from None
    if not isinstance(value, dict):
        raise BadArgs("the request body is a JSON object")
    return value


def _int(params: Any, name: str, default: int) -> int:
    value = params.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise BadArgs(f"{name} must be an integer, not {value[:50]!r}") from None


def _given(params: Any, **names: str) -> dict[str, str]:
    """The op's arguments (keys) from the URL's parameters (values) that the URL has: one left out
    is the op's own "required" error (bad_args), not an empty value looked up as a document."""
    return {arg: params[name] for arg, name in names.items() if name in params}


def _bounded_int(text: str | None, default: int, low: int, high: int) -> int:
    try:
        return max(low, min(high, int(text))) if text else default
    except ValueError:
        return default


def _uri_param(request: Request) -> str:
    uri = request.query_params.get("uri", "")
    if not uri or len(uri) > MAX_URI:
        raise _Refused(error_response(BadArgs("uri: the URI of an indexed document"), anyone=False))
    return uri


def _own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


def _origin_of(url: str) -> str:
    if not url:
        return ""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


def _local_target(request: Request) -> str:
    return request.url.path + ("?" + request.url.query if request.url.query else "")


def _safe_next(target: str) -> str:
    """Where to go after the login: a path of this site only (not //evil.example, not a URL)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target or len(target) > 4096:
        return "/"
    return target


def _derive(secret: str, purpose: str) -> str:
    import hashlib

    return hashlib.sha256(f"{purpose}:{secret}".encode()).hexdigest()[:32]


# -- template filters --------------------------------------------------------------------------------
def human_size(n: int | None) -> str:
    return "" if n is None else human(n)


def when(seconds: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds)) if seconds else ""


def marked(text: str, marks: list[list[int]] | None, first: int = 0) -> Markup:
    """``text`` escaped, with each [start, end) range of ``marks`` in a <mark>; ``first``: the
    number of the first mark in the page (their ids, hit-1, hit-2, ..., for the preview's jumps)."""
    out, at = [], 0
    for i, (a, b) in enumerate(sorted(marks or [])):
        if a < at:
            continue
        out.append(str(escape(text[at:a])))
        n = first + i + 1
        out.append(f'<mark class="hit" id="hit-{n}">' if first >= 0 else "<mark>")
        out.append(str(escape(text[a:b])))
        out.append("</mark>")
        at = b
    out.append(str(escape(text[at:])))
    return Markup("".join(out))


def query_with(q: str, extra: str) -> str:
    """The query narrowed by a facet's filter (index.narrowed), for the templates' links."""
    return narrowed(q, [extra])
