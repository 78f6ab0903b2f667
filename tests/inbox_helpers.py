"""Kept importable for tests being written on other branches: new tests import `support.*`."""

from support.delivery import RECORD, action, inbox_items, ledger_entries, ship_loop, the_approval
from support.fake_gh import PROGRAMS, fake_gh, gh_calls, gh_state
from support.repos import add_remote, remote_refs

__all__ = [
    "PROGRAMS",
    "RECORD",
    "action",
    "add_remote",
    "fake_gh",
    "gh_calls",
    "gh_state",
    "inbox_items",
    "ledger_entries",
    "remote_refs",
    "ship_loop",
    "the_approval",
]
