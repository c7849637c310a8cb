"""The scope's web server: a Bokeh server on 127.0.0.1 in its own thread, reachable with a
random token only (in the URL once; the page's cookie then carries it, as Jupyter does)."""

from __future__ import annotations

import asyncio
import hmac
import secrets
import threading
from collections.abc import Callable
from typing import Any

from bokeh.application import Application
from bokeh.application.handlers.function import FunctionHandler
from bokeh.document import Document
from bokeh.server.auth_provider import AuthProvider
from bokeh.server.server import Server
from tornado.ioloop import IOLoop
from tornado.web import HTTPError, RequestHandler
from tornado.websocket import WebSocketHandler

COOKIE = "copapy_scope_token"
DENIED = "/denied"


class Denied(RequestHandler):
    """Where a request without the token ends: 403 and how to get in."""

    def get(self) -> None:
        self.set_status(403)
        self.write("<h1>403: refused</h1><p>This copapy scope needs its token: open the URL "
                   "that <code>copapy scope</code> or <code>tg.scope()</code> printed "
                   "(it ends in <code>?token=...</code>).</p>")


class TokenAuth(AuthProvider):
    """Bokeh's authentication hook: the token in the query (then kept in a cookie) or the
    cookie; anything else goes to DENIED."""

    def __init__(self, token: str) -> None:
        self.token = token
        super().__init__()

    @property  # Bokeh calls it with the request handler, not the request its stub names
    def get_user(self) -> Callable[[Any], str | None]:  # type: ignore[override]
        def user(handler: Any) -> str | None:
            given = handler.get_argument("token", None)
            if given is not None and hmac.compare_digest(given, self.token):
                if not isinstance(handler, WebSocketHandler):  # (the page's websocket)
                    handler.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict")
                return "scope"
            cookie = handler.get_cookie(COOKIE)
            if cookie is not None and hmac.compare_digest(cookie, self.token):
                return "scope"
            if isinstance(handler, WebSocketHandler):
                # Bokeh checks a websocket once it is open, where a redirect to DENIED is
                # impossible: close it (policy violation) and end its handler quietly
                handler.close(1008, "refused: open the scope's URL with its token")
                raise HTTPError(403)
            return None

        return user

    @property
    def login_url(self) -> str:
        return DENIED

    @property
    def login_handler(self) -> type[RequestHandler]:
        return Denied


class ScopeServer:
    """Serves ``make_doc`` at http://127.0.0.1:PORT/?token=...; ``port`` 0 picks a free one."""

    def __init__(self, make_doc: Callable[[Document], None], port: int = 0) -> None:
        self.token = secrets.token_urlsafe(24)
        self._make_doc = make_doc
        self._ready = threading.Event()
        self._loop: IOLoop | None = None
        self._server: Server | None = None
        self._error: BaseException | None = None
        self.port = port
        self._thread = threading.Thread(target=self._run, name="copapy-scope-http",
                                        daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise RuntimeError(f"the scope's web server did not start: {self._error}"
                               ) from self._error

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def _run(self) -> None:
        asyncio.set_event_loop(asyncio.new_event_loop())
        try:
            self._loop = IOLoop.current()
            app = Application(FunctionHandler(self._make_doc))
            self._server = Server({"/": app}, io_loop=self._loop, address="127.0.0.1",
                                  port=self.port, auth_provider=TokenAuth(self.token),
                                  # without a port: the bound one (Bokeh adds it)
                                  allow_websocket_origin=["127.0.0.1", "localhost"])
            self._server.start()
            self.port = self._server.port or self.port
        except BaseException as exc:  # reported by __init__
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.start()

    def close(self) -> None:
        loop, server = self._loop, self._server
        if loop is None or server is None:
            return

        def shut() -> None:
            server.stop()
            loop.stop()

        loop.add_callback(shut)
        self._thread.join(timeout=5)
        self._loop = None
