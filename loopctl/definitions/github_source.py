"""`[tasks] source = "github"`: which issues or pull requests become a loop's tasks.

The filter values come from the loop file (the user's own words), yet they still reach `gh` only
as `--flag=value`, so none can turn into an option; issue and PR text never reaches a template
(see loopctl.github_tasks).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from enum import StrEnum

from loopctl.definitions.fields import Table

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


def _login(table: Table, key: str) -> str | None:
    value = table.string(key, max_len=64)
    if value is not None and not _LOGIN.match(value):
        table.error(key, f'{table.where(key)} must be a GitHub login or "@me", not {value!r}')
        return None
    return value


def _printable(table: Table, key: str, value: str) -> bool:
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        table.error(key, f"{table.where(key)} may not hold control characters or newlines")
        return False
    return True


def check_safe_template(table: Table, key: str, template: str | None) -> None:
    """A github task's template may only use SAFE_FIELDS: untrusted text is never spliced."""
    if template is None:
        return
    try:
        parsed = list(string.Formatter().parse(template))
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
    kind = table.string("kind", required=True, choices=[k.value for k in GithubKind])
    labels = table.string_list("labels")
    for label in labels:
        _printable(table, "labels", label)
    author = _login(table, "author")
    assignee = _login(table, "assignee")
    review_requested = _login(table, "review_requested")
    checks = table.string("checks", "any", choices=("any", "failing"))
    actionable = table.boolean("actionable", False)
    search = table.string("search", max_len=256)
    if search is not None:
        _printable(table, "search", search)
    limit = table.integer("limit", 30, minimum=1)
    if limit is not None and limit > MAX_LIMIT:
        table.error("limit", f"{table.where('limit')} is at most {MAX_LIMIT}, not {limit}")
    if kind == GithubKind.ISSUES:
        for key in ("review_requested", "checks", "actionable"):
            if table.has(key):
                table.error(key, f'{table.where(key)} applies to kind = "prs" only')
    for key, why in (
        ("command", "source = \"github\" runs `gh` itself; drop 'command'"),
        ("id", 'a github task\'s id is fixed ("issue-N" / "pr-N") so it stays stable'),
    ):
        if table.has(key):
            table.known(key)
            table.error(key, f"{table.where(key)}: {why}")
    if kind == GithubKind.PRS and table.has("base"):
        table.error(
            "base",
            f"{table.where('base')}: a PR task always starts from the pull request's head",
        )
    if kind is None or len(table.problems.errors) > errors:
        return None
    return GithubQuery(
        kind=GithubKind(kind),
        labels=labels,
        author=author,
        assignee=assignee,
        review_requested=review_requested,
        failing_checks=checks == "failing",
        actionable=actionable,
        search=search,
        limit=limit or 30,
    )
