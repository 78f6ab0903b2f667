"""Fake maker that fails the way a CLI does: chatter on stdout, the reason last on stderr.

Its output carries what must never reach a person as is: a terminal escape that clears the
screen and the value of a secret the parent's environment holds (argv[1]).
"""

import sys

sys.stdin.read()
secret = sys.argv[1]
for n in range(40):
    print(f"step {n}: thinking")
print(f"using token {secret}")
print("\x1b[2J\x1b[Hall checks passed", file=sys.stderr)
print("Error: Not logged in · Please run /login", file=sys.stderr)
sys.exit(1)
