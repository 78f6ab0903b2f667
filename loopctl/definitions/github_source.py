"""`[tasks] source = "github"`: which issues or pull requests become a loop's tasks.

The filter values come from the loop file (the user's own words), yet they still reach `gh` only
as `--flag=value`, so none can turn into an option; issue and PR text never reaches a template
(see loopctl.tasks.github).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from string import Formatter

from loopctl.definitions.fields import Table
from loopctl.definitions.schema import (
    Field,
    boolean,
    integer,
    read,
    refused,
    string,
    strings,
)

# A GitHub login, `@me`, or an app's bot login such as `dependabot[bot]`.
_LOGIN = re.compile(r"^(@me|[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?)$")
MAX_LIMIT = 100
# What a github task's `prompt` / `base` template may use: values GitHub itself constrains.
# Titles, bodies and comments are written by anyone who can open an issue; they are quoted as
# data after the prompt instead, never spliced into the instructions.
SAFE_FIELDS = ("number", "kind", "url", "author", "changed")


class GithubKind(StrEnum):
    ISSUES = "issues"
    PRS = "prs"


@dataclass(frozen=True, slots=True)
class GithubQuery:
    """Which open issues or pull requests to list (every filter must hold)."""

    kind: GithubKind
    labels: tuple[str, ...] = ()
    author: str | None = None
    assignee: str | None = None
    review_requested: str | None = None  # prs only
    failing_checks: bool = False  # prs only: `checks = "failing"`
    actionable: bool = False  # prs only: failing checks or new review comments
    search: str | None = None  # GitHub search syntax, passed as --search=…
    limit: int = 30


def _login(table: Table, key: str, value: str) -> None:
    if not _LOGIN.match(value):
        table.error(key, f'{table.where(key)} must be a GitHub login or "@me", not {value!r}')


def _printable(table: Table, key: str, value: str) -> None:
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        table.error(key, f"{table.where(key)} may not hold control characters or newlines")


def _printable_each(table: Table, key: str, values: tuple[str, ...]) -> None:
    for value in values:
        _printable(table, key, value)


def _at_most(table: Table, key: str, limit: int) -> None:
    if limit > MAX_LIMIT:
        table.error(key, f"{table.where(key)} is at most {MAX_LIMIT}, not {limit}")


# The github keys of `[tasks]`, in the order they are read.
GITHUB_FIELDS = (
    Field("kind", string, required=True, choices=tuple(k.value for k in GithubKind)),
    Field("labels", strings, check=_printable_each),
    Field("author", string, max_len=64, check=_login),
    Field("assignee", string, max_len=64, check=_login),
    Field("review_requested", string, max_len=64, check=_login),
    Field("checks", string, "any", choices=("any", "failing")),
    Field("actionable", boolean, False),
    Field("search", string, max_len=256, check=_printable),
    Field("limit", integer, 30, minimum=1, check=_at_most),
)
PRS_ONLY = ("review_requested", "checks", "actionable")
REFUSED_FIELDS = (
    Field("command", refused("source = \"github\" runs `gh` itself; drop 'command'")),
    Field("id", refused('a github task\'s id is fixed ("issue-N" / "pr-N") so it stays stable')),
)


def check_safe_template(table: Table, key: str, template: str | None) -> None:
    """A github task's template may only use SAFE_FIELDS: untrusted text is never spliced."""
    if template is None:
        return
    try:
        parsed = list(Formatter().parse(template))
    except ValueError:
        return  # loops._check_template reports it
    for _literal, name, _spec, _conv in parsed:
        if name is None or name in SAFE_FIELDS:
            continue
        table.error(
            key,
            f"'{key}' uses {{{name}}}, but a github task's {key} may only use"
            f" {', '.join('{' + f + '}' for f in SAFE_FIELDS)}: the title, body, checks and"
            " review comments are untrusted text, and loopctl quotes them as data after the"
            " prompt by itself",
        )
        return


def read_github_query(table: Table) -> GithubQuery | None:
    """The github keys of a `[tasks]` table (source = "github"); None when unusable."""
    errors = len(table.problems.errors)
    values = read(table, GITHUB_FIELDS)
    kind = values.pop("kind")
    if kind == GithubKind.ISSUES:
        for key in PRS_ONLY:
            if table.has(key):
                table.error(key, f'{table.where(key)} applies to kind = "prs" only')
    read(table, REFUSED_FIELDS)
    if kind == GithubKind.PRS and table.has("base"):
        table.error(
            "base",
            f"{table.where('base')}: a PR task always starts from the pull request's head",
        )
    if kind is None or len(table.problems.errors) > errors:
        return None
    checks = values.pop("checks")
    return GithubQuery(kind=GithubKind(kind), failing_checks=checks == "failing", **values)
