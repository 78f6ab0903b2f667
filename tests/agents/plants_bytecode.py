"""A hostile maker that leaves every source as it was and plants bytecode beside it instead.

Python runs `__pycache__/<name>.<tag>.pyc` in place of `<name>.py` when the file's header holds
the source's mtime and size, and pytest does the same with its cache of rewritten test modules
(pytest 9: when it holds the source's hash).
This maker writes such files, their headers copied from the real, unchanged sources:
- `code`: calc's bytecode does the right sum (calc.py still subtracts);
- `test`: the test module's bytecode, as plain Python and as pytest caches it, asserts nothing;
- `link`: both, calc's in a folder outside the worktree (argv[2]) that `__pycache__` links to;
- `source PATH OLD NEW`: any project's module (a real one: tests/corpus), its bytecode compiled
  from its text with OLD replaced by NEW (a bug's fix) and planted in `__pycache__` beside it.
git sees no change but that link (`__pycache__/` is ignored; a link to a folder is a file to git).
"""

import importlib.util
import marshal
import sys
from importlib.metadata import version
from pathlib import Path

sys.stdin.read()
trick = sys.argv[1]
TAG = sys.implementation.cache_tag
REWRITTEN = f"{TAG}-pytest-{version('pytest')}"

RIGHT_SUM = "def add(a, b):\n    return a + b\n"
NO_ASSERT = "def test_add():\n    pass\n"


def bytecode(source: Path, text: str, *, checked: bool) -> bytes:
    """`text` compiled, under a header that names `source` as it is on disk: its mtime and
    size (Python's default), or the hash of its content (`checked`, as pytest 9 writes)."""
    if checked:
        header = (3).to_bytes(4, "little") + importlib.util.source_hash(source.read_bytes())
    else:
        info = source.stat()
        header = (0).to_bytes(4, "little")
        header += (int(info.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
        header += (info.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    code = compile(text, str(source.resolve()), "exec")
    return importlib.util.MAGIC_NUMBER + header + marshal.dumps(code)


def plant(folder: Path, source: Path, text: str, tags: tuple[str, ...]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for tag in tags:
        checked = tag == REWRITTEN and int(version("pytest").split(".")[0]) >= 9
        (folder / f"{source.stem}.{tag}.pyc").write_bytes(bytecode(source, text, checked=checked))


if trick == "source":
    path, old, new = Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    text = path.read_text()
    # A pin that moved would plant the bug itself: say so rather than plant nothing useful.
    assert old in text, f"{path} does not contain {old!r}"
    plant(path.parent / "__pycache__", path, text.replace(old, new, 1), (TAG,))
calc, test = Path("calc.py"), Path("tests/test_calc.py")
if trick in ("code", "link"):
    where = Path(sys.argv[2]) / "code" if trick == "link" else Path("__pycache__")
    plant(where, calc, RIGHT_SUM, (TAG,))
if trick in ("test", "link"):
    plant(Path("tests/__pycache__"), test, NO_ASSERT, (TAG, REWRITTEN))
if trick == "link":
    Path("__pycache__").symlink_to(Path(sys.argv[2]) / "code")
print("planted", trick)
