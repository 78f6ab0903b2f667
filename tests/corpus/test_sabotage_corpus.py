"""The sabotage scan raises no false alarm on real projects (issue 26, "How it is judged").

Each project of the corpus (scripts/fetch-corpus), committed as the first commit of a fresh
repository, is read as one diff that adds every file: every line of its source, tests and
configuration passes through every rule of loopctl.checks.sabotage. Not one may be flagged.
"""

from __future__ import annotations

import pytest
from support.corpus import PROJECTS, checkout, commit, work_folder
from support.repos import git

from loopctl.checks.sabotage import added_lines, scan_diff

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_a_real_project_read_as_one_added_diff_raises_nothing(name: str) -> None:
    with work_folder() as folder:
        repo = checkout(name, folder)
        commit(repo, "as published")
        diff = git(repo, "diff", "--no-color", "--no-ext-diff", EMPTY_TREE, "HEAD")

    assert len(added_lines(diff)) > 300  # the whole project was read, not an empty diff
    assert [f.describe() for f in scan_diff(diff)] == []
