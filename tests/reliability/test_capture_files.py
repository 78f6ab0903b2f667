"""Issue 13: what a program prints reaches its capture file redacted and bounded.

Real programs through `process.run`: one puts a secret at every offset around the point where a
long line is cut between two reads, one prints 50 MiB. The file never holds a secret raw, and
keeps the head and the tail of a flood with a note of how much was cut in between.
"""

from __future__ import annotations

import os
import random
import re
import sys
from pathlib import Path

import pytest

from loopctl import process
from loopctl.secrets import REDACTED, Redactor

PY = sys.executable
PROGRAMS = Path(__file__).parents[1] / "programs"
SECRET = "sk-live-canary-0123456789abcdef"
# Where the old capture flushed a line that had no newline yet (1 MiB): the cut to probe.
CUT = 1 << 20
NOTE = re.compile(rb"\n\[loopctl: (\d+) bytes cut here; .*?\]\n")
sys.path.insert(0, str(PROGRAMS))
from floods_output import lines  # noqa: E402


@pytest.fixture
def env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", os.defpath)}


def test_a_secret_at_every_offset_around_the_cut_never_reaches_the_file_raw(
    tmp_path: Path, env: dict[str, str]
) -> None:
    redactor = Redactor([SECRET])
    longest = max(len(form) for form in redactor.secrets)
    total = CUT + 4096
    # Every start from "ends just before the cut" to "starts just after it", for the longest
    # form the redactor knows (the raw value and its encodings).
    starts = range(CUT - longest - 1, CUT + 2)
    leaked = []
    for start in starts:
        out = tmp_path / f"out-{start}.log"
        done = process.run(
            [PY, str(PROGRAMS / "secret_at_cut.py"), SECRET, str(start), str(CUT), str(total)],
            cwd=tmp_path,
            env=env,
            stdout_path=out,
            redactor=redactor,
        )
        assert done.exit_code == 0, done.stderr_tail
        data = out.read_bytes()
        expected = b"x" * start + REDACTED.encode() + b"x" * (total - start - len(SECRET)) + b"\n"
        if data != expected or SECRET in done.stdout_tail:
            leaked.append(start - CUT)
        out.unlink()
    print(f"\nsecret at {len(starts)} offsets around the cut; not redacted at {leaked}")
    assert leaked == []


def test_a_flood_keeps_head_and_tail_with_a_note_and_no_raw_secret(
    tmp_path: Path, env: dict[str, str]
) -> None:
    mebibytes = 50
    out = tmp_path / "maker.out"
    done = process.run(
        [PY, str(PROGRAMS / "floods_output.py"), str(mebibytes), SECRET, str(out)],
        cwd=tmp_path,
        env=env,
        stdout_path=out,
        stderr_path=tmp_path / "maker.err",
        redactor=Redactor([SECRET]),
    )
    assert done.exit_code == 0, done.stderr_tail
    stream = Redactor([SECRET]).redact_bytes(b"".join(lines(mebibytes, SECRET)))
    head, tail = process.CAPTURE_HEAD_BYTES, process.CAPTURE_TAIL_BYTES
    data = out.read_bytes()
    note = NOTE.search(data)
    during = int(done.stderr_tail.split()[-1])
    print(
        f"\n{mebibytes} MiB printed: {len(data)} bytes on disk at the end,"
        f" {during} while the program ran; note: {note.group(0).strip() if note else None!r}"
    )
    assert SECRET.encode() not in data
    assert note is not None
    assert int(note.group(1)) == len(stream) - head - tail
    assert data == stream[:head] + note.group(0) + stream[-tail:]
    # Bounded while it runs too (a crash leaves no giant file): at most one more tail's worth.
    assert during <= head + 2 * tail + len(note.group(0)) + 64
    assert done.stdout_tail.endswith(stream[-100:].decode())


def test_output_within_the_cap_is_kept_whole(tmp_path: Path, env: dict[str, str]) -> None:
    size = process.CAPTURE_HEAD_BYTES + process.CAPTURE_TAIL_BYTES
    code = f"import sys; sys.stdout.write('y' * {size - 1} + '\\n')"
    out = tmp_path / "out.log"
    process.run([PY, "-c", code], cwd=tmp_path, env=env, stdout_path=out)
    assert out.read_bytes() == b"y" * (size - 1) + b"\n"


def test_any_chunking_and_any_cap_keep_head_and_tail_of_the_redacted_stream(
    tmp_path: Path,
) -> None:
    """Property over random streams, read splits and caps: the file is exactly the head and the
    tail of what redacting the whole stream at once gives, with the note between them. Secrets
    share prefixes and come with their encodings, so the carry-over has work to do."""
    secrets = [SECRET, "sk-live-other-secret", "token-2468-abcdef"]
    redactor = Redactor(secrets)
    rng = random.Random(13)
    words = [*redactor.secrets, "x", "sk-", "sk-live-", "\n", "filler text ", "tok"]
    for trial in range(300):
        stream = "".join(rng.choice(words) for _ in range(60)).encode()
        head, tail = rng.randint(0, 300), rng.randint(0, 300)
        out = tmp_path / f"chunked-{trial}.log"
        sink = process._Sink(out, head=head, tail=tail)
        capture = process._Capture(sink, redactor, 64_000)
        offset = 0
        while offset < len(stream):
            size = rng.randint(1, 40)
            capture.feed(stream[offset : offset + size])
            offset += size
        capture.finish()
        sink.close()
        assert capture.error is None
        whole = redactor.redact_bytes(stream)
        expected = whole
        if len(whole) > head + tail:
            note = process._CUT_NOTE.format(cut=len(whole) - head - tail, head=head, tail=tail)
            expected = whole[:head] + note.encode() + whole[len(whole) - tail :]
        assert out.read_bytes() == expected, trial
        out.unlink()
