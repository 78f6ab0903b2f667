"""The dashboard's door: the one-line bugs of loopctl/ui/security.py (and the cookie it hands
out in loopctl/ui/server.py) that would open it to a script, another page or a stale session
(issue 27).

The session cookie is read from the real `Set-Cookie` header a real `loopctl ui` process sends
over HTTP on 127.0.0.1; the Host and Origin rules are asked of `Guard` for each kind of address
the server can be bound to (one binding per process, so not every kind can be started here);
session ends and limits run against `Sessions` with the test's clock. Each test names the
mutants it kills.
"""

from __future__ import annotations

from http.cookies import SimpleCookie
from pathlib import Path

import httpx
from support.ui import dashboard, served

from loopctl.ui import security
from loopctl.ui.security import Guard, Sessions, is_loopback

HEADERS = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


def _set_cookie(answer: httpx.Response) -> tuple[str, str, dict[str, str]]:
    """The one cookie a response sets: its name, value and attributes (lower-case keys; a
    flag without a value is "True")."""
    (raw,) = answer.headers.get_list("set-cookie")
    parsed = SimpleCookie()
    parsed.load(raw)
    ((name, morsel),) = parsed.items()
    flags = {part.strip().split("=", 1)[0].lower() for part in raw.split(";")[1:]}
    attributes = {k: str(v) for k, v in morsel.items() if v}
    attributes.update({flag: "True" for flag in flags if flag in ("httponly", "secure")})
    return name, morsel.value, attributes


def test_the_session_cookie_is_httponly_strict_and_ends_with_the_browser(repo: Path) -> None:
    """Kills `httponly=True` dropped or turned off (a script on the dashboard's origin would
    read the session), `samesite="strict"` changed (another site's page would send it), the
    cookie's path changed, and a Max-Age or Secure added; and each of the security headers
    dropped from the table a page, a redirect and a refusal carry."""
    with dashboard(repo) as ui, httpx.Client(timeout=60) as client:
        answer = client.get(ui.url, follow_redirects=False)
        assert answer.status_code == 303, answer.text
        name, value, attributes = _set_cookie(answer)
        assert name == ui.cookie
        assert value
        assert value != ui.token  # a new id: the link's token is not the session
        assert attributes.get("httponly") == "True", answer.headers["set-cookie"]
        assert attributes.get("samesite", "").lower() == "strict", answer.headers["set-cookie"]
        assert attributes.get("path") == "/", answer.headers["set-cookie"]
        # No Max-Age or Expires: it ends with the browser. Not Secure: plain http on loopback
        # would then never send it back.
        assert not {"max-age", "expires", "secure"} & set(attributes), attributes
        page = client.get(f"{ui.base}/inbox")
        assert page.status_code == 200  # the cookie as set signs the next request in
        # A browser that named the server `localhost` is let in too (the same loopback).
        named = client.get(f"{ui.base}/inbox", headers={"Host": f"localhost:{ui.port}"})
        assert named.status_code == 200
        refused = httpx.get(f"{ui.base}/inbox", timeout=60)
        assert refused.status_code == 401
        for shown in (answer, page, refused):
            for header, expected in HEADERS.items():
                assert shown.headers.get(header) == expected, (header, shown.headers)
            assert "frame-ancestors 'none'" in shown.headers["content-security-policy"]


def test_a_change_needs_a_same_origin_post_of_this_very_server(repo: Path) -> None:
    """Over real HTTP with the dashboard's app: kills the Host check turned off (DNS
    rebinding), the Origin check's guards turned off (no Origin, `null`, another port of
    127.0.0.1, a cross-site fetch) and a token accepted on a POST (a page could sign a victim
    in with the attacker's link while posting)."""
    sessions = Sessions()
    with served(repo, sessions) as base, httpx.Client(timeout=60) as browser:
        port = base.rsplit(":", 1)[1]
        assert browser.get(f"{base}/?token={sessions.new_link()}").status_code == 303
        act = f"{base}/inbox/nosuchitem/approve"
        # A page whose DNS name rebinds to 127.0.0.1 reaches the port but names itself in Host:
        # refused even with the session's cookie, and its sign-in link is not spent either.
        rebound = {"Host": f"evil.example:{port}"}
        assert browser.get(f"{base}/inbox", headers=rebound).status_code == 403
        link = sessions.new_link()
        assert httpx.get(f"{base}/?token={link}", headers=rebound).status_code == 403
        assert sessions.exchange(link) is not None
        for headers in (
            {},
            {"Origin": "null"},
            {"Origin": f"http://127.0.0.1:{int(port) + 1}"},
            {"Origin": base, "Sec-Fetch-Site": "cross-site"},
            {"Origin": base, "Sec-Fetch-Site": "same-site"},
            {"Origin": f"http://localhost:{port}"},  # another origin than the page's Host
        ):
            answer = browser.post(act, headers=headers, data={"note": "x"})
            assert answer.status_code == 403, (headers, answer.status_code)
            assert "a change must come from a page of this dashboard" in answer.text
        # The same POST from the server's own page passes the door (the item is unknown).
        own = browser.post(act, headers={"Origin": base, "Sec-Fetch-Site": "same-origin"})
        assert own.status_code != 403, own.text
        link = sessions.new_link()
        posted = httpx.post(f"{base}/?token={link}", headers={"Origin": base}, timeout=60)
        assert posted.status_code == 403
        assert "set-cookie" not in posted.headers
        assert sessions.exchange(link) is not None  # the POST did not spend the link either


def test_host_names_each_kind_of_binding_accepts() -> None:
    """Kills an entry dropped or changed in LOOPBACK_NAMES or WILDCARDS, the server's own
    address dropped from `hosts()`, the empty name kept in it, and IPv6 addresses left
    unbracketed (or bracketed twice)."""
    port = 8123
    # Bound to one loopback address, it answers to every loopback name.
    for bound in ("127.0.0.1", "::1", "[::1]", "localhost"):
        guard = Guard(host=bound, port=port)
        for host in ("localhost", "127.0.0.1", "[::1]"):
            assert guard.host_ok(f"{host}:{port}"), (bound, host)
    named = Guard(host="localhost", port=port)
    for host in ("localhost", "127.0.0.1", "[::1]", "LOCALHOST"):
        assert named.host_ok(f"{host}:{port}"), host
    assert not named.host_ok(f"127.0.0.2:{port}")
    assert not named.host_ok(f"localhost:{port + 1}")
    # A server bound to one address of the machine answers to that address.
    lan = Guard(host="192.168.1.2", port=port)
    assert lan.host_ok(f"192.168.1.2:{port}")
    assert not lan.host_ok(f"192.168.1.3:{port}")
    for bound in ("fd00::5", "[fd00::5]"):
        six = Guard(host=bound, port=port)
        assert six.host_ok(f"[fd00::5]:{port}"), bound
        assert not six.host_ok(f"fd00::5:{port}"), bound
    # Bound to every address: any address literal of the port, never a name.
    for wildcard in ("0.0.0.0", "::", ""):
        wide = Guard(host=wildcard, port=port)
        for host in ("10.1.2.3", "[fd00::5]", "127.0.0.1", "[::1]"):
            assert wide.host_ok(f"{host}:{port}"), (wildcard, host)
        # `a1.2.3.4` is a name, not an address, whatever letters are stripped from it.
        for host in ("rebind.example", "", "[]", "a1.2.3.4", "[::1]-x"):
            assert not wide.host_ok(f"{host}:{port}"), (wildcard, host)
        assert not wide.host_ok(f"10.1.2.3:{port + 1}"), wildcard
    assert not Guard(host="", port=port).host_ok(f":{port}")
    for missing in (None, ""):  # a request without Host (HTTP/1.0) is refused, not a crash
        assert not Guard(host="127.0.0.1", port=port).host_ok(missing)
        assert not Guard(host="0.0.0.0", port=port).host_ok(missing)
    # Origin: exactly http:// and the request's own Host, which must be this server's.
    guard = Guard(host="127.0.0.1", port=port)
    assert guard.origin_ok(f"http://127.0.0.1:{port}", None, f"127.0.0.1:{port}")
    assert not guard.origin_ok(f"https://127.0.0.1:{port}", None, f"127.0.0.1:{port}")
    assert not guard.origin_ok(f"http://evil.example:{port}", None, f"evil.example:{port}")
    assert not guard.origin_ok(f"http://127.0.0.1:{port}", "", f"127.0.0.1:{port}")
    assert not guard.origin_ok(f"http://127.0.0.1:{port}", "none", f"127.0.0.1:{port}")
    assert not guard.origin_ok(f"http://127.0.0.1:{port}", None, None)


def test_loopback_is_recognised_in_every_spelling() -> None:
    """Kills the brackets no longer stripped (or other characters stripped too): `--host
    [::1]` would be warned about as reachable from the network, and a name ending in one of
    the stripped characters taken for another."""
    for host in ("127.0.0.1", "127.9.9.9", "::1", "[::1]", "localhost", "LocalHost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "", "[::]", "192.168.1.2", "localhost.example", "[fd00::a]"):
        assert not is_loopback(host), host


def test_sessions_are_bounded_and_the_oldest_goes_first() -> None:
    """Kills the link check turned off (any token would open a session, a link more than
    once), the prune before a new session dropped (a live session would be evicted to make
    room while ended ones are kept) and the cap on live sessions changed."""
    now = [0.0]
    sessions = Sessions(idle_s=60, max_age_s=3600, clock=lambda: now[0])
    link = sessions.new_link()
    assert sessions.exchange(f"{link}x") is None  # only the live link's very token opens one
    kept = sessions.exchange(link)
    assert kept is not None
    assert sessions.exchange(link) is None  # once
    idle = []
    for _ in range(security.MAX_SESSIONS - 1):
        now[0] += 0.01
        opened = sessions.exchange(sessions.new_link())
        assert opened is not None
        idle.append(opened)
    now[0] = 50
    assert sessions.valid(kept)  # used: alive; the others are left idle
    now[0] = 100  # the others ended (idle since ~0.6 s), `kept` was used 50 s ago
    newest = sessions.exchange(sessions.new_link())
    assert newest is not None
    assert sessions.valid(kept), "a live session was evicted while ended ones were kept"
    assert sessions.valid(newest)
    assert not any(sessions.valid(s) for s in idle)
    # Full of live sessions: the oldest goes, the rest stay.
    live = [sessions.exchange(sessions.new_link()) for _ in range(security.MAX_SESSIONS)]
    assert all(live)
    assert not sessions.valid(kept)
    assert all(sessions.valid(s) for s in live)
    assert security.MAX_SESSIONS == 64


def test_defaults_end_a_session_after_30_minutes_idle_and_12_hours() -> None:
    """Kills the default idle time or maximum age changed (what `loopctl ui` uses unless told
    otherwise)."""
    now = [0.0]
    sessions = Sessions(clock=lambda: now[0])
    first = sessions.exchange(sessions.new_link())
    now[0] = 30 * 60
    assert sessions.valid(first)
    now[0] = 60 * 60 + 1
    assert not sessions.valid(first)
    second = sessions.exchange(sessions.new_link())
    for _ in range(24):
        now[0] += 29 * 60 + 59
        assert sessions.valid(second)
    now[0] += 29 * 60  # past 12 hours since it began
    assert not sessions.valid(second)


def test_a_live_stream_over_http_keeps_no_session_alive_and_a_used_link_only_redirects(
    repo: Path,
) -> None:
    """Over real HTTP with the dashboard's app and the test's clock: kills the stream's path
    (`/runs/…/stream`) changed or emptied where the server tells a page's own live stream
    from a human's request (a tab left open on a run would keep its session alive for
    ever, or a run's own page would not count as activity), HEAD dropped from the reads, and
    the "already signed in" check turned off (the same browser opening its used link again is
    sent to the page, not refused)."""
    now = [0.0]
    sessions = Sessions(idle_s=60, max_age_s=3600, clock=lambda: now[0])
    with served(repo, sessions) as base, httpx.Client(timeout=60) as browser:
        link = f"{base}/?token={sessions.new_link()}"
        assert browser.get(link).status_code == 303
        now[0] = 50
        with browser.stream("GET", f"{base}/runs/nosuchrun/stream") as stream:
            assert stream.status_code == 404  # let through (no such run), not touched
        again = browser.get(link)  # the used link, from the browser that used it
        assert again.status_code == 303
        assert again.headers["location"] == "/"
        assert "set-cookie" not in again.headers
        now[0] = 50 + 59  # 59 s after the last human request (the used link, at 50)
        assert browser.get(f"{base}/runs/nosuchrun").status_code == 404  # a run's page: a human's
        now[0] = 109 + 59
        assert browser.head(f"{base}/loops").status_code == 200  # HEAD is a read too
        now[0] = 168 + 50
        with browser.stream("GET", f"{base}/runs/nosuchrun/stream") as stream:
            assert stream.status_code == 404
        now[0] = 168 + 61  # the stream 11 s ago counts for nothing: idle since 168
        ended = browser.get(f"{base}/loops")
        assert ended.status_code == 401


def test_a_sign_in_link_redirects_to_the_same_page_without_the_token(repo: Path) -> None:
    """The token leaves the address bar and the history, and nothing else does: the page, its
    other parameters with their names and values (repeated ones too, in order; an empty value;
    names and values that need quoting; names that only look like `token`), no `?` when
    nothing is left, and a path that cannot send the browser to another host (`//host`).
    Kills the kept pairs turned into one-element tuples (only names, or only values), the `/`
    or `?` changed or emptied, and the filter on the name turned off or changed."""
    sessions = Sessions()
    with served(repo, sessions) as base, httpx.Client(timeout=60) as browser:
        cases = {
            "/inbox?tab=log&token={t}&tab=diff&q=a+b": "/inbox?tab=log&tab=diff&q=a+b",
            "/inbox?token={t}": "/inbox",
            "/loops?token={t}&": "/loops",  # an empty pair is no parameter
            "//evil.example/inbox?token={t}&x=1": "/evil.example/inbox?x=1",
            # Quoted on the way in, read, quoted again on the way out: the same pairs.
            (
                "/inbox?note=x%26y%3Dz&token={t}&empty=&tokens=1&Token=2&my%20key=v"
            ): "/inbox?note=x%26y%3Dz&empty=&tokens=1&Token=2&my+key=v",
            # A page it does not have keeps its path as asked, every letter of it.
            "/missing/-page?token={t}&a=1": "/missing/-page?a=1",
        }
        for asked, expected in cases.items():
            answer = browser.get(base + asked.format(t=sessions.new_link()))
            assert answer.status_code == 303, (asked, answer.status_code, answer.text)
            assert answer.headers["location"] == expected, asked
            # Where it sends the browser is this dashboard's page, the session now signed in
            # (`//evil.example` and `/missing` are no page of it; the first stays on this host).
            landed = browser.get(base + answer.headers["location"])
            missing = "evil" in asked or "missing" in asked
            assert landed.status_code == (404 if missing else 200), (asked, landed.text)
            assert "token" not in dict(landed.url.params)


def test_only_a_runs_live_stream_and_a_jobs_poll_leave_a_session_idle(repo: Path) -> None:
    """Every other request of the browser is a human's and keeps the session alive, whatever
    its path ends with (an item called `stream`, a page it does not have); a page following a
    job it started (`/jobs/…`) does not. Kills `/runs/` emptied (any path ending in /stream
    would leave the session idle) and `/jobs/` changed (a page left open on a job would keep
    its session alive for ever)."""
    now = [0.0]
    sessions = Sessions(idle_s=60, max_age_s=3600, clock=lambda: now[0])
    with served(repo, sessions) as base, httpx.Client(timeout=60) as browser:
        assert browser.get(f"{base}/?token={sessions.new_link()}").status_code == 303
        for step, path in enumerate(("/inbox/stream", "/stream", "/loops/stream"), start=1):
            now[0] = step * 50  # 50 s after the request before: idle for less than 60 s
            assert browser.get(base + path).status_code in (200, 404), path
        now[0] = 150 + 50
        assert browser.get(f"{base}/jobs/nosuchjob").status_code == 404  # let through
        now[0] = 150 + 61  # the job's poll 11 s ago counts for nothing: idle since 150
        assert browser.get(f"{base}/loops").status_code == 401
