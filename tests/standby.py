"""A standby coordinator as clients meet it, served for real on 127.0.0.1: every `/api/...`
request 503 with `Retry-After: 1`, `Astraeus-Leader: <url>` (absent while no leader is known)
and `{"error": "this coordinator is a standby; the leader is <url>", "fields": [], "leader":
<url> | null}`; `GET /healthz` 503 `{"status": "standby", "leader": ...}`; any other GET (a
console page) 307 to the leader's URL and the same path. It keeps every request it saw, so a
test can say that a client never sent one (or its token) here."""

from __future__ import annotations

import asyncio
import socket
import threading
from dataclasses import dataclass, field

from aiohttp import web


@dataclass(frozen=True)
class Seen:
    """One request the standby received."""

    method: str
    path: str
    authorization: str | None


@dataclass
class Standby:
    """`leader`: the URL this standby names (None: no leader known); may change while it runs."""

    leader: str | None = None
    seen: list[Seen] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Standby:
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result()
        return self

    def __exit__(self, *_exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._answer)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        listening = socket.socket()
        listening.bind(("127.0.0.1", 0))
        self.port = int(listening.getsockname()[1])
        await web.SockSite(self._runner, listening).start()

    async def _stop(self) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        self.seen.append(Seen(request.method, request.path, request.headers.get("Authorization")))
        if request.path.startswith("/api/"):
            named = self.leader or "not known"
            body = {
                "error": f"this coordinator is a standby; the leader is {named}",
                "fields": [],
                "leader": self.leader,
            }
            headers = {"Retry-After": "1"}
            if self.leader is not None:
                headers["Astraeus-Leader"] = self.leader
            return web.json_response(body, status=503, headers=headers)
        if request.path == "/healthz" or self.leader is None or request.method != "GET":
            body = {"status": "standby", "leader": self.leader}
            return web.json_response(body, status=503, headers={"Retry-After": "1"})
        raise web.HTTPTemporaryRedirect(self.leader.rstrip("/") + request.path_qs)
