"""`spectui share [DIR] [--listen 127.0.0.1:8765] [--max-viewers 20]`: `spectui follow DIR` in
browsers, through textual-serve.

textual-serve starts one app process per browser connection; here each is a follower, so no
viewer ever starts a llama-server. textual-serve documents one API, `Server(...).serve()`, which
has no way to add what a share needs, so its `Server`'s index and websocket handlers, its
`public_url` and its template and static folders are mounted on an aiohttp app of our own, behind
the gate `SERVE_HANDLERS` (`spectui.core.overrides`: the tested textual-serve, those names
present, `SPECTUI_STOCK` unset). The app adds:

* **Loopback by default.** Another interface is served only with a warning, and every route
  lives under an unguessable token (`secrets.token_urlsafe`): a request without it is refused.
* **A viewer limit.** Beyond ``--max-viewers`` open viewers, the page says the share is full
  and no process is started.
* **No orphans.** A closed tab closes its websocket; textual-serve then tells the follower to
  quit and waits for it; stopping the share does the same for every viewer.

Where the gate says no, a loopback share runs textual-serve's own `serve()` (no viewer limit,
said in one line) and a share beyond loopback is refused in one line: without the token guard
anyone who reaches the port could watch.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import secrets
import shlex
import sys
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

from spectui.commands.command import Invocation, Subparsers
from spectui.commands.follow import (
    FollowArgsError,
    FollowCommandOptions,
    add_follow_arguments,
    follow_options,
)
from spectui.core.overrides import Override

if TYPE_CHECKING:
    from aiohttp import web
    from aiohttp.typedefs import Handler, Middleware

    from spectui.config import Settings
    from spectui.core.sessions.tail import FollowOptions

NAME = "share"

DEFAULT_LISTEN = "127.0.0.1:8765"
DEFAULT_MAX_VIEWERS = 20
TOKEN_BYTES = 24
"""Random bytes in the URL token of a non-loopback share (32 URL-safe characters)."""
TITLE = "spectui follow"

SERVE_HANDLERS = Override(
    name="serve-handlers", library="textual-serve", tested_version="1.1.3", for_speed=False
)
"""`ShareServer`: textual-serve's `Server.handle_index`/`handle_websocket` on our own app, its
`public_url` set per request, its template and static folders (see the module docstring)."""


def _handlers_present() -> bool:
    """Whether textual-serve's `Server` has what `ShareServer` mounts, shaped as tested."""
    import inspect
    from pathlib import Path

    from textual_serve.server import Server

    server = Server("true")
    handlers = (Server.handle_index, Server.handle_websocket)
    return (
        all(list(inspect.signature(h).parameters) == ["self", "request"] for h in handlers)
        and inspect.iscoroutinefunction(Server.handle_websocket)
        and isinstance(server.public_url, str)
        and (Path(server.templates_path) / "app_index.html").is_file()
        and Path(server.statics_path).is_dir()
    )


def serve_handlers_enabled() -> bool:
    """Whether `ShareServer` may mount textual-serve's handlers in this process."""
    from spectui.core.overrides import enabled

    return enabled(SERVE_HANDLERS, _handlers_present)


@dataclass(frozen=True)
class Listen:
    """Where the share listens."""

    host: str
    port: int

    @property
    def loopback(self) -> bool:
        """Whether only this machine can connect."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name: whatever it resolves to, treat it as reachable

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_listen(text: str) -> Listen:
    """'HOST:PORT' (IPv6 in brackets: '[::1]:8765'); argparse's error when it is not."""
    host, colon, port_text = text.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not colon or not host or not 0 < port < 65536:
        raise argparse.ArgumentTypeError(
            f"--listen is HOST:PORT, e.g. {DEFAULT_LISTEN}, not {text!r}"
        )
    return Listen(host, port)


def viewers(text: str) -> int:
    """A positive viewer count."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--max-viewers is a whole number >= 1, not {text!r}")
    return value


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """Register `spectui share`."""
    share = commands.add_parser(
        NAME,
        help="serve `spectui follow DIR` to browsers (textual-serve; one follower per viewer)",
        description="Each browser tab gets its own `spectui follow` process (never a "
        "llama-server). Loopback by default; another interface only with a warning and a "
        "token in the URL.",
    )
    add_follow_arguments(share)
    share.add_argument(
        "--listen",
        type=parse_listen,
        default=parse_listen(DEFAULT_LISTEN),
        metavar="HOST:PORT",
        help=f"where to listen (default {DEFAULT_LISTEN}: this machine only)",
    )
    share.add_argument(
        "--max-viewers",
        type=viewers,
        default=DEFAULT_MAX_VIEWERS,
        metavar="N",
        help=f"viewers at once; later ones get a page saying so (default {DEFAULT_MAX_VIEWERS})",
    )
    return share


class ShareOptions(FollowCommandOptions):
    """`spectui share`'s options: what each viewer's follower follows, and where to listen."""

    listen: Listen = parse_listen(DEFAULT_LISTEN)
    """--listen: where the share listens (HOST:PORT)."""
    max_viewers: int = DEFAULT_MAX_VIEWERS
    """--max-viewers: viewers at once; later ones get a page saying so."""


def follower_command(options: FollowOptions, settings: Settings) -> str:
    """The shell command textual-serve starts per viewer (``exec``: no shell left between)."""
    argv = [
        sys.executable,
        "-m",
        "spectui.cli",
        "--theme",
        settings.theme,
        "follow",
        str(options.target.resolve()),
        "--waiting-after",
        repr(options.waiting_after_s),
        "--stopped-after",
        repr(options.stopped_after_s),
    ]
    return "exec " + shlex.join(argv)


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title></head>"
        f"<body style='font-family: sans-serif; margin: 3em'><h1>{escape(title)}</h1>"
        f"<p>{escape(body)}</p></body></html>"
    )


class ShareServer:
    """textual-serve's handlers behind a token and a viewer limit."""

    def __init__(
        self, command: str, listen: Listen, *, max_viewers: int, token: str | None
    ) -> None:
        from textual_serve.server import Server

        self.listen = listen
        self.max_viewers = max_viewers
        self.token = token
        self.prefix = f"/{token}" if token else ""
        self.serve = Server(command, host=listen.host, port=listen.port, title=TITLE)
        self.viewers = 0
        """Viewers connected right now (each one a follower process)."""
        self._viewing: set[asyncio.Task[object]] = set()
        """The open viewers' websocket handlers, ended when the share stops (`_stop_viewers`)."""

    @property
    def url(self) -> str:
        """What to open in a browser (with the token, when there is one)."""
        return f"http://{self.listen}{self.prefix}/"

    def app(self) -> web.Application:
        """The aiohttp application: textual-serve's index, websocket and statics, guarded."""
        import aiohttp_jinja2
        import jinja2
        from aiohttp import web

        app = web.Application(middlewares=[self._guard])
        app.on_shutdown.append(self._stop_viewers)
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.serve.templates_path))
        app.add_routes(
            [
                web.get(f"{self.prefix}/", self._index, name="index"),
                web.get(f"{self.prefix}/ws", self._websocket, name="websocket"),
                web.static(f"{self.prefix}/static", self.serve.statics_path, name="static"),
            ]
        )
        return app

    @property
    def _guard(self) -> Middleware:
        from aiohttp import web

        prefix = self.prefix

        @web.middleware
        async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
            if prefix and not (request.path == prefix or request.path.startswith(prefix + "/")):
                return web.Response(
                    status=403,
                    content_type="text/html",
                    text=_page(
                        "spectui share: token needed",
                        "This share is open beyond this machine, so it needs its full URL, "
                        "token included. Ask whoever shares it for the link.",
                    ),
                )
            if request.path == prefix:
                raise web.HTTPFound(prefix + "/")
            return await handler(request)

        return guard

    def _full(self) -> web.Response:
        from aiohttp import web

        return web.Response(
            status=503,
            content_type="text/html",
            text=_page(
                "spectui share: full",
                f"All {self.max_viewers} viewer places are taken. Try again when someone "
                "closes their tab.",
            ),
        )

    async def _index(self, request: web.Request) -> web.StreamResponse:
        if self.viewers >= self.max_viewers:
            return self._full()
        # The page's websocket URL follows the address the browser used (the listen address may
        # be 0.0.0.0); handle_index reads public_url before its first await.
        self.serve.public_url = f"{request.scheme}://{request.host}"
        response: web.StreamResponse = await self.serve.handle_index(request)
        return response

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        if self.viewers >= self.max_viewers:
            return self._full()
        self.viewers += 1
        task = asyncio.current_task()
        if task is not None:
            self._viewing.add(task)
        try:
            return await self.serve.handle_websocket(request)
        finally:
            self.viewers -= 1
            if task is not None:
                self._viewing.discard(task)

    async def _stop_viewers(self, _app: web.Application) -> None:
        """Stopping the share ends every open viewer at once: cancelled, textual-serve's handler
        tells its follower to quit, waits for it and closes the websocket. Left open, aiohttp's
        graceful shutdown waited on each viewer's handler for up to a minute."""
        viewing = list(self._viewing)
        for task in viewing:
            task.cancel()
        await asyncio.gather(*viewing, return_exceptions=True)


Options = ShareOptions


def run(options: ShareOptions, invocation: Invocation) -> int:
    """Run `spectui share` until Ctrl-C / SIGTERM; returns the exit status."""
    settings = invocation.settings
    try:
        import textual_serve  # noqa: F401
    except ImportError:
        raise FollowArgsError(
            "spectui share needs textual-serve: pip install textual-serve"
        ) from None
    from aiohttp import web

    followed = follow_options(settings, options)
    listen = options.listen
    if not serve_handlers_enabled():
        return _serve_stock(follower_command(followed, settings), listen)
    token = None if listen.loopback else secrets.token_urlsafe(TOKEN_BYTES)
    server = ShareServer(
        follower_command(followed, settings), listen, max_viewers=options.max_viewers, token=token
    )
    if token is not None:
        print(
            f"spectui: warning: sharing beyond this machine on {listen}: anyone who can reach "
            "it and has the URL below can watch (no TLS); requests without its token are "
            "refused",
            file=sys.stderr,
        )
    ready = (
        f"spectui share: following {followed.target} · open {server.url} "
        f"(at most {options.max_viewers} viewers) · Ctrl-C stops"
    )
    try:
        # aiohttp calls ``print`` once it listens: the URL is shown only when it works.
        web.run_app(
            server.app(),
            host=listen.host,
            port=listen.port,
            print=lambda _: print(ready, flush=True),
        )
    except OSError as error:
        raise FollowArgsError(f"cannot listen on {listen}: {error.strerror}") from None
    return 0


def _serve_stock(command: str, listen: Listen) -> int:
    """textual-serve's own server (its public API): no token and no viewer limit, so loopback
    only."""
    from spectui.core.overrides import why_off

    if not listen.loopback:
        raise FollowArgsError(
            f"a share beyond this machine needs its token guard, which mounts textual-serve"
            f" {SERVE_HANDLERS.tested_version}'s handlers, off here ({why_off(SERVE_HANDLERS)}):"
            " share on 127.0.0.1, or install that version"
        )
    from textual_serve.server import Server

    print("spectui: warning: textual-serve's own server: no viewer limit", file=sys.stderr)
    try:
        Server(command, host=listen.host, port=listen.port, title=TITLE).serve()
    except OSError as error:
        raise FollowArgsError(f"cannot listen on {listen}: {error.strerror}") from None
    return 0
