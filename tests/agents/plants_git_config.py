"""A maker that plants every git config key that runs a program, then fixes calc.add.

argv: MARKER. Each planted program appends its own label to MARKER when anything runs it, so a
test can assert that loopctl's commit, diff, approval and push ran none of them. Everything
goes into the repository's shared config (`git config` in a linked worktree writes the common
.git/config), into files in the worktree that config includes, and into attributes (the
worktree's .gitattributes and the common info/attributes, which every worktree reads).
"""

import stat
import subprocess
import sys
from pathlib import Path

marker = sys.argv[1]
sys.stdin.read()
tools = Path(".tools").resolve()
tools.mkdir()


def program(label: str, then: str = "cat") -> str:
    """A script that records `label` in MARKER, then acts like the tool it stands in for."""
    path = tools / label.replace("/", "_").replace(":", "_")
    path.write_text(f"#!/bin/sh\necho {label} >> '{marker}'\n{then}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


PLANTED = {
    "core.pager": program("core.pager"),
    "pager.diff": program("pager.diff"),
    "pager.log": program("pager.log"),
    "pager.show": program("pager.show"),
    "pager.status": program("pager.status"),
    "core.editor": program("core.editor", "true"),
    "sequence.editor": program("sequence.editor", "true"),
    "core.sshCommand": program("core.sshCommand", "exit 1"),
    "core.askPass": program("core.askPass", "echo x"),
    "core.gitProxy": program("core.gitProxy", "exit 1"),
    "core.fsmonitor": program("core.fsmonitor", "exit 0"),
    "core.alternateRefsCommand": program("core.alternateRefsCommand", "true"),
    "credential.helper": program("credential.helper", "true"),
    "remote.origin.receivepack": program("remote.origin.receivepack", "exit 1"),
    "remote.origin.uploadpack": program("remote.origin.uploadpack", "exit 1"),
    "filter.evil.clean": program("filter.clean"),
    "filter.evil.smudge": program("filter.smudge"),
    "filter.evil.process": program("filter.process", "exit 1"),
    "diff.evil.textconv": program("diff.textconv"),
    "diff.evil.command": program("diff.command", "true"),
    "diff.external": program("diff.external", "true"),
    "merge.evil.driver": program("merge.driver", "exit 1"),
    "gpg.program": program("gpg.program", "exit 1"),
    "gpg.openpgp.program": program("gpg.openpgp.program", "exit 1"),
    "gpg.x509.program": program("gpg.x509.program", "exit 1"),
    "gpg.ssh.program": program("gpg.ssh.program", "exit 1"),
    "gpg.ssh.defaultKeyCommand": program("gpg.ssh.defaultKeyCommand", "exit 1"),
    "commit.gpgSign": "true",
    "tag.gpgSign": "true",
    "push.gpgSign": "true",
    "log.showSignature": "true",
}
for key, value in PLANTED.items():
    git("config", key, value)

hooks = tools / "hooks"
hooks.mkdir()
for hook in ("pre-commit", "commit-msg", "post-commit", "pre-push", "reference-transaction",
             "post-checkout", "post-merge", "pre-auto-gc", "post-index-change"):  # fmt: skip
    (hooks / hook).symlink_to(program(f"hook:{hook}", "exit 0"))
git("config", "core.hooksPath", str(hooks))

# Included files are read with the including file's trust: plant more through them.
included = tools / "included.gitconfig"
included.write_text(
    f"[core]\n\tpager = {program('include:core.pager')}\n"
    f'[diff "inc"]\n\ttextconv = {program("include:diff.textconv")}\n'
    f"[credential]\n\thelper = {program('include:credential.helper', 'true')}\n"
)
git("config", "include.path", str(included))
conditional = tools / "conditional.gitconfig"
conditional.write_text(f"[core]\n\tsshCommand = {program('includeIf:core.sshCommand', 'exit 1')}\n")
git("config", "includeIf.gitdir:/.path", str(conditional))

# Attributes that name the planted drivers: in this worktree, and for every worktree of the
# repository through the common git dir's info/attributes.
attributes = "* filter=evil diff=evil merge=evil\n*.py diff=inc\n"
Path(".gitattributes").write_text(attributes)
common = subprocess.run(
    ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
    check=True, capture_output=True, text=True,
).stdout.strip()  # fmt: skip
(Path(common) / "info").mkdir(exist_ok=True)
(Path(common) / "info" / "attributes").write_text(attributes)
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print(f"planted {len(PLANTED)} keys, hooks, two includes and attributes; fixed add()")
