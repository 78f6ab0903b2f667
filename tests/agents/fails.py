"""Fake maker that crashes: an error on stderr and exit code 3."""

import sys

sys.stdin.read()
print("starting work")
print("fatal: the model refused to cooperate", file=sys.stderr)
sys.exit(3)
