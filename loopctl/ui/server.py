"""The dashboard's HTTP server: routes, the guard every request passes, and `serve`.

Starlette routes render `pages` from `views`; one ASGI layer in front (`guarded`) checks the
Host, trades a one-time link for a session cookie, checks that session and, for a change, the
origin (see `security`). Inbox actions run
`loopctl.commands.inbox` — the functions `loopctl inbox approve/…` call — in a worker thread, so
a delivery or a retried run does not hold the page: the POST answers at once with the job's id
and the page follows the job (`jobs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
import webbrowser
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from anyio import to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from loopctl.commands.deliver import ACTIONS as DELIVERIES
from loopctl.commands.report import build as report_of
from loopctl.definitions import load_project
from loopctl.definitions.fields import format_duration
from loopctl.errors import LoopctlError
from loopctl.journal import history
from loopctl.journal.events import EventLog
from loopctl.journal.history import find_run
from loopctl.journal.inbox import items
from loopctl.paths import ProjectPaths, cache_home
from loopctl.sandbox import harden_self
from loopctl.scheduling.timing import zone
from loopctl.ui import assets, live, pages, views
from loopctl.ui.jobs import ACTIONS, Jobs, JobState, deliver_runner, runner
from loopctl.ui.jobs import state as job_state
from loopctl.ui.security import Guard, Sessions, is_loopback, query_token, store_path

# How long one poll of a job's state waits for it to end before answering "still running".
JOB_WAIT_S = 20.0
# One server-sent-events response lasts this long; the browser reconnects (Last-Event-ID) after.
STREAM_S = 60.0
MAX_FORM_BYTES = 64 * 1024
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
        " connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # "no-referrer" makes a form's Origin "null"
    "cache-control": "no-store",
    "x-frame-options": "DENY",
}
# What every refusal of a link or a session tells the human to do.
NEW_LINK = (
    "press Enter in the terminal where `loopctl ui` runs (or send it SIGUSR1) for a new"
    " one-time link, and open that"
)


class UiUnavailable(LoopctlError):
    """The `[ui]` extra is not installed (exit 1)."""


@dataclass(slots=True)
class Dashboard:
    """What the routes share: the project, the guard, and the actions in flight."""

    root: Path
    guard: Guard
    sessions: Sessions
    stopping: Callable[[], bool] = lambda: False
    jobs: Jobs = field(default_factory=Jobs)
    # One reader for the server's life: it parses only what was appended since the last read.
    log: EventLog | None = None
    # The inbox projection of the log as of its last seq (a pure function of the events).
    _items: tuple[int, list[Any]] = (-1, [])
    _runs: tuple[int, dict[str, Any]] = (-1, {})

    @property
    def workers(self) -> Any:
        return self.jobs.workers

    def project(self) -> Any:

        return load_project(self.root)

    def events(self) -> list[Any]:
        if self.log is None:
            self.log = EventLog(ProjectPaths(self.root).events_file)
        return self.log.read()

    def items(self) -> list[Any]:

        events = self.events()
        seq = events[-1].seq if events else 0
        if self._items[0] != seq:
            self._items = (seq, items(events))
        return self._items[1]

    def runs(self) -> dict[str, Any]:
        """`history.fold` of the log as of its last seq."""

        events = self.events()
        seq = events[-1].seq if events else 0
        if self._runs[0] != seq:
            self._runs = (seq, history.fold(events))
        return self._runs[1]

    def loops(self) -> views.LoopsView:

        events = self.events()
        return views.loops_view(
            self.project(),
            events,
            views.now_utc(),
            zone(None),
            runs=self.runs(),
            every=self.items(),
        )

    @property
    def name(self) -> str:
        return str(self.root)


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status)


def _refused(reason: str, status: int = 403) -> HTMLResponse:
    return HTMLResponse(pages.refused_page(reason), status_code=status)


def build_app(board: Dashboard) -> ASGIApp:
    """The guarded ASGI application."""

    def loops(request: Request) -> Response:
        return _html(pages.loops_page(board.loops(), board.name))

    def inbox(request: Request) -> Response:
        page = request.query_params.get("page", "1")
        view = views.inbox_view(
            board.items(),
            page=int(page) if page.isdigit() else 1,
            closed=request.query_params.get("all") == "1",
            loop=request.query_params.get("loop") or None,
        )
        return _html(pages.inbox_page(view, board.name, views.now_utc()))

    def item(request: Request) -> Response:
        ref = request.path_params["item"]
        try:
            view = views.item_view(board.project(), ref)
        except LoopctlError as exc:
            return _html(pages.layout("not found", f"<p>{pages.esc(exc)}</p>"), 404)
        notice = _notice(board, request.query_params.get("job"))
        return _html(pages.item_page(view, board.name, notice))

    async def act(request: Request) -> Response:
        ref, action = request.path_params["item"], request.path_params["action"]
        if action not in ACTIONS:
            return _refused(f"no action {action!r}", 404)
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return _refused("the form is too large", 413)
        form = dict(parse_qsl(body.decode("utf-8", "replace")))
        # Off the event loop: finding the item reads the log.
        job = await to_thread.run_sync(_start, board, ref, action, form)
        # At once: the work goes on in a worker thread. The page's script asked for JSON and
        # follows the job; a plain form (no script) lands on the item's page, which does.
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse(
                {"job": job, "item": ref, "action": action, "state": f"/jobs/{job}"}, 202
            )
        return RedirectResponse(pages.url("inbox", ref) + "?" + urlencode({"job": job}), 303)

    async def job(request: Request) -> Response:
        found = board.jobs.get(request.path_params["job"])
        if found is None:
            return _refused("no such job (they end with the server)", 404)
        raw = request.query_params.get("wait", "0")
        wait = min(float(raw), JOB_WAIT_S) if raw.isdigit() else 0.0
        if wait and not found.future.done():
            # Wakes when the job ends; the future is the worker's, shielded from our timeout.
            # (Its failure is the state's to report, below.)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(found.future)), wait)
        events = await to_thread.run_sync(board.events)
        return JSONResponse(job_state(found, events).to_json())

    def runs(request: Request) -> Response:
        listing = views.runs_list(
            views.recent_runs(board.events()),
            show_skipped=request.query_params.get("skipped") == "1",
        )
        return _html(pages.runs_page(listing, board.name))

    def run(request: Request) -> Response:
        try:
            project = board.project()
            view = views.run_page(project, board.events(), request.path_params["run"])
            offer = views.deliver_view(project, view.run.run)
        except LoopctlError as exc:
            return _html(pages.layout("not found", f"<p>{pages.esc(exc)}</p>"), 404)
        notice = _notice(board, request.query_params.get("job"))
        return _html(pages.run_page(view, board.name, offer, notice))

    async def deliver(request: Request) -> Response:
        ref, action = request.path_params["run"], request.path_params["action"]
        if action not in DELIVERIES:
            return _refused(f"no delivery action {action!r}", 404)
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return _refused("the form is too large", 413)
        form = dict(parse_qsl(body.decode("utf-8", "replace")))
        events = await to_thread.run_sync(board.events)
        after = events[-1].seq if events else 0
        work = deliver_runner(board.project, ref, action, form)
        job = board.jobs.start(ref, action, None, after, work).id
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse(
                {"job": job, "run": ref, "action": action, "state": f"/jobs/{job}"}, 202
            )
        return RedirectResponse(pages.url("runs", ref) + "?" + urlencode({"job": job}), 303)

    def stream(request: Request) -> Response:
        ref = request.path_params["run"]
        raw = request.headers.get("last-event-id") or request.query_params.get("after", "0")
        after = int(raw) if raw.isdigit() else 0
        try:
            found = find_run(board.events(), ref)
        except LoopctlError as exc:
            return _refused(str(exc), 404)
        return StreamingResponse(
            _follow(board, found.run, found.events[0].ts if found.events else found.started, after),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    def report(request: Request) -> Response:
        since = request.query_params.get("since") or "last"
        try:
            found = report_of(board.project(), since, events=board.events())
        except LoopctlError as exc:
            return _html(pages.layout("Report", f"<p>{pages.esc(exc)}</p>"), 400)
        return _html(pages.report_page(found, board.name, since))

    def home(request: Request) -> Response:
        return RedirectResponse("/loops", 303)

    def css(request: Request) -> Response:
        return Response(assets.CSS, media_type="text/css")

    def js(request: Request) -> Response:
        return Response(assets.JS, media_type="text/javascript")

    app = Starlette(
        routes=[
            Route("/", home),
            Route("/loops", loops),
            Route("/inbox", inbox),
            Route("/inbox/{item}", item),
            Route("/inbox/{item}/{action}", act, methods=["POST"]),
            Route("/jobs/{job}", job),
            Route("/runs", runs),
            Route("/runs/{run}", run),
            Route("/runs/{run}/stream", stream),
            Route("/runs/{run}/deliver/{action}", deliver, methods=["POST"]),
            Route("/report", report),
            Route("/static/app.css", css),
            Route("/static/app.js", js),
        ]
    )
    return guarded(app, board.guard, board.sessions)


def guarded(app: ASGIApp, guard: Guard, sessions: Sessions) -> ASGIApp:
    """`app` behind the checks of `security`: Host, session, and the origin of a change."""

    async def guarded_app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await app(scope, receive, send)
            return
        request = Request(scope)
        response = _check(request, guard, sessions)
        if response is not None:
            await _secure(response)(scope, receive, send)
            return

        async def send_secured(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_secured)

    return guarded_app


def _secure(response: Response) -> Response:
    for key, value in SECURITY_HEADERS.items():
        response.headers[key] = value
    return response


def _check(request: Request, guard: Guard, sessions: Sessions) -> Response | None:
    """A refusal, the redirect that trades a link for a session, or None when the request may
    go on."""
    host = request.headers.get("host")
    if not guard.host_ok(host):
        return _refused("this server answers only to the address it was started on (Host)")
    presented = query_token(request.query_params.multi_items())
    current = request.cookies.get(guard.cookie)
    if presented is not None:
        if request.method != "GET":
            return _refused(f"a link is opened, never sent with a change: {NEW_LINK}")
        session = sessions.exchange(presented)
        if session is not None:
            response = _without_token(request)
            # HttpOnly: no script reads it; SameSite=Strict: no other site's page sends it;
            # no Max-Age: it ends with the browser (and earlier, server-side, when idle). Not
            # Secure: browsers then withhold it over plain http, which is all a loopback server
            # has (TLS would need a certificate the browser trusts; loopback never leaves the
            # machine), and some browsers do so even on 127.0.0.1.
            response.set_cookie(
                guard.cookie, session, httponly=True, samesite="strict", path="/", secure=False
            )
            return response
        if sessions.valid(current):
            # Already signed in (an old link opened again in the same browser): the link is
            # only an address now.
            return _without_token(request)
        return _refused(
            "this link was already used (a link opens one session, once) or is not this"
            f" dashboard's: {NEW_LINK}"
        )
    # A page's own live stream is not a human's activity: it must not keep a session alive.
    path = request.url.path
    stream = path.startswith("/runs/") and path.endswith("/stream")
    # Nor is a page following the action it started (the click was the activity).
    stream = stream or path.startswith("/jobs/")
    if not sessions.valid(current, touch=not stream):
        return _refused(
            "no session, or it ended (after"
            f" {format_duration(sessions.idle_s)} idle, or {format_duration(sessions.max_age_s)}"
            f" after it began): {NEW_LINK}",
            401,
        )
    if request.method not in ("GET", "HEAD"):
        if request.method != "POST":
            return _refused("method not allowed", 405)
        if not guard.origin_ok(
            request.headers.get("origin"), request.headers.get("sec-fetch-site"), host
        ):
            return _refused("a change must come from a page of this dashboard (Origin)")
    return None


def _without_token(request: Request) -> Response:
    """A redirect to the same page without its token: the token leaves the address bar and
    the history."""
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
    # "/" + the path without its leading slashes: "//host" would send the browser away.
    path = "/" + request.url.path.lstrip("/")
    return RedirectResponse(path + (("?" + urlencode(kept)) if kept else ""), 303)


# --- actions --------------------------------------------------------------------------------


def _start(board: Dashboard, ref: str, action: str, form: dict[str, str]) -> str:
    """Start `loopctl inbox ACTION` on a worker thread; returns the job's id."""
    loop = next((i.loop for i in board.items() if i.id == ref or i.id.startswith(ref)), None)
    events = board.events()
    after = events[-1].seq if events else 0
    return board.jobs.start(ref, action, loop, after, runner(board.project, ref, action, form)).id


def _notice(board: Dashboard, job: str | None) -> JobState | None:
    """Where the job `?job=` names stands, for the item's page (which follows it if running)."""
    found = board.jobs.get(job)
    return None if found is None else job_state(found, board.events())


# --- live run -------------------------------------------------------------------------------


def _follow(board: Dashboard, run: str, start: str, after: int) -> Iterator[str]:
    """Server-sent events of `run` (`live.follow`) for one stream's time."""

    paths = ProjectPaths(board.root)
    try:
        agents = board.project().agents
    except LoopctlError:
        agents = {}

    def backend_of(name: str) -> str:
        agent = agents.get(name)
        return str(agent.backend) if agent is not None else "command"

    deadline = time.monotonic() + STREAM_S

    def stop() -> bool:
        return board.stopping() or time.monotonic() > deadline

    output = live.AgentOutput(paths.runs_dir / run, backend_of)
    yield from live.follow(paths.events_file, run, start, after, output, stop)


# --- serving --------------------------------------------------------------------------------


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host`:`port` (0: a free port)."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise LoopctlError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(64)
    sock.set_inheritable(False)
    return sock


def serve(
    root: Path,
    *,
    host: str,
    port: int,
    sessions: Sessions,
    on_ready: Callable[[str, Callable[[], str]], None],
) -> None:
    """Serve the dashboard of `root` until interrupted; `on_ready(url, new_link)` once it
    listens, with its first one-time link and a function that makes the next one (any thread;
    it is the caller's to show it to the human, never over HTTP)."""
    import uvicorn  # lazy: the `ui` extra's server, loaded only when the dashboard starts

    # Our /proc files (memory, environ) unreadable to other processes of the user.
    harden_self()
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    guard = Guard(host=host, port=bound)
    # A restart on the same address and port keeps the tabs it had open (their sessions).

    sessions.persist(store_path(cache_home(), root, host, bound))
    board = Dashboard(root=root, guard=guard, sessions=sessions)
    config = uvicorn.Config(
        build_app(board),
        log_level="warning",
        access_log=False,
        lifespan="off",
        server_header=False,
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    board.stopping = lambda: bool(server.should_exit)
    # Parse the log and import what the pages need now, so that the first page is quick.
    _warm(board)
    shown = host if is_loopback(host) or host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    name = f"[{shown}]" if ":" in shown else shown

    def new_link() -> str:
        return f"http://{name}:{bound}/?token={sessions.new_link()}"

    on_ready(new_link(), new_link)
    try:
        server.run(sockets=[sock])
    finally:
        board.jobs.shutdown()
        sock.close()


def _warm(board: Dashboard) -> None:
    with contextlib.suppress(LoopctlError):  # the page will say what is wrong
        board.loops()


def start_browser(url: str) -> None:
    """Open `url` in the user's browser, off the main thread (it may block on some systems)."""

    threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
