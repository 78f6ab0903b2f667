"""Kept importable for tests being written on other branches: new tests import `support.*`."""

from support.journal import due, last_seq, wait_event
from support.processes import Proc, running_procs, spawn

__all__ = ["Proc", "due", "last_seq", "running_procs", "spawn", "wait_event"]
