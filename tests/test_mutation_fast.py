"""The fast mutation subset runs with the suite: every hand-written bug of issue 18 is caught.

`bench/mutation.py --fast` mutates a temporary copy of the package (the two small targets in
full, plus the hand-written mutants of every guarantee's module) and runs the mapped tests
against each mutant. It exits 1 when any mutant survives, so a test that stops guarding a
promise fails here, in the README's test command and so in CI. The whole set runs on demand.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(1200)
def test_no_hand_written_or_fast_target_mutant_survives() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mutation.py"), "--fast"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1150,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "hand-written survived" not in report
    assert "survived:" not in report
    assert "killed" in report  # it measured something
