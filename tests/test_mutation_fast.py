"""The fast mutation subset runs with the suite: every hand-written bug of issues 18 and 27 (an
fsync dropped from the log's append or an atomic write among them) is caught.

`bench/mutation.py --fast` mutates a copy of the package outside /tmp (the two small targets in
full with cosmic-ray's operators, plus the hand-written mutants of every guarantee's module) and
runs against each hand-written mutant the tests that kill it (`killers`), which must pass
unmutated first. It exits 1 when any mutant survives, so a test that stops guarding a promise,
or is deleted, fails here, in the README's test command and so in CI. The whole set runs on
demand.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.outside_tmp import outside_tmp

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(2400)  # a hang guard, not a deadline: ~1.5 min idle, 4 on a busy machine
def test_no_hand_written_or_fast_target_mutant_survives() -> None:
    # The copies go outside /tmp: the agents the tests start see a private /tmp (issue 27).
    with outside_tmp("mutation") as work:
        done = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "mutation.py"), "--fast", "--work", str(work)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=2350,
        )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "hand-written survived" not in report
    assert "survived:" not in report
    assert "killed" in report  # it measured something
