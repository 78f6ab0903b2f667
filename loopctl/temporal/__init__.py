"""Loops on a Temporal service: `loopctl worker` runs attempts as activities (issue 32).

Only this package imports `temporalio` (the `temporal` extra), and only the commands that use it
import this package, so every other command starts without it.
"""
