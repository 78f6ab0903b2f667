"""Browser profiles and shell histories are hidden in the sandbox (issue 25): where a user's
dashboard link, a pasted key or a session cookie lingers. A hostile process under bubblewrap
reads what a scratch HOME holds."""

from __future__ import annotations

import json
import os
import pwd
import sys
from pathlib import Path

import pytest

from loopctl import process, sandbox

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] is None, reason=f"no sandbox on this machine: {sandbox.probe()[2]}"
)

SECRET = "http://127.0.0.1:41873/?token=planted-in-history"

PLANTED = (
    ".bash_history",
    ".zsh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".psql_history",
    ".lesshst",
    ".viminfo",
    ".mozilla/firefox/abcd.default-release/places.sqlite",
    ".config/google-chrome/Default/History",
    ".config/chromium/Default/Cookies",
    ".config/BraveSoftware/Brave-Browser/Default/History",
    "snap/firefox/common/.mozilla/firefox/x.default/places.sqlite",
    ".var/app/org.mozilla.firefox/.mozilla/firefox/x.default/places.sqlite",
    "Library/Application Support/Google/Chrome/Default/History",
)

# Reads every path given and says what it got: the secret, or why not.
HUNT = r"""
import json, sys
from pathlib import Path
seen = {}
for name in sys.argv[2:]:
    path = Path(sys.argv[1]) / name
    try:
        seen[name] = "SECRET" if "planted-in-history" in path.read_text() else "empty"
    except OSError as exc:
        seen[name] = exc.strerror or "refused"
print(json.dumps(seen))
"""


def hunt(tmp_path: Path, readable: list[str]) -> dict[str, str]:
    home, root, worktree = tmp_path / "home", tmp_path / "repo", tmp_path / "work"
    for folder in (root, worktree):
        folder.mkdir()
    for name in (*PLANTED, "notes.txt"):
        path = home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{SECRET}\n")
    box = sandbox.make_sandbox(root=root, worktree=worktree, readable=readable)
    done = process.run(
        [sys.executable, "-I", "-c", HUNT, str(home), *PLANTED, "notes.txt"],
        cwd=worktree,
        env={**os.environ, "HOME": str(home)},
        timeout=60,
        sandbox=box,
    )
    assert done.ok, done.output_tail()
    return json.loads(done.stdout_tail.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_sandboxed_process_reads_no_history_or_browser_profile(tmp_path: Path) -> None:
    seen = hunt(tmp_path, readable=[])
    assert seen.pop("notes.txt") == "SECRET"  # the home itself is readable: the hunt works
    leaked = {name: got for name, got in seen.items() if got == "SECRET"}
    assert leaked == {}
    assert set(seen) == set(PLANTED)


def test_read_re_exposes_a_history_as_it_does_a_credential_store(tmp_path: Path) -> None:
    seen = hunt(tmp_path, readable=["~/.bash_history", "~/.mozilla"])
    assert seen[".bash_history"] == "SECRET"
    assert seen[".mozilla/firefox/abcd.default-release/places.sqlite"] == "SECRET"
    assert seen[".zsh_history"] != "SECRET"


def test_the_accounts_own_home_is_covered_whatever_home_says(tmp_path: Path) -> None:
    box = sandbox.make_sandbox(root=tmp_path, worktree=tmp_path)
    hidden = box.hidden_paths({"HOME": str(tmp_path / "elsewhere")})
    account = Path(pwd.getpwuid(os.getuid()).pw_dir)
    for name in (".bash_history", ".mozilla", ".config/google-chrome", ".python_history"):
        assert account / name in hidden
        assert tmp_path / "elsewhere" / name in hidden
