"""loopctl, for the crash tests: dies by SIGKILL right after appending event N to the log.

    python tests/programs/loopctl_killed_at.py N <loopctl arguments...>
    python tests/programs/loopctl_killed_at.py attempt_started <loopctl arguments...>

N is an event's seq; a name is an event type: the first event of that type appended; `note:WHAT`
the first note of that `what` (note:backend_paused).

Fault injection stays out of the product: this wrapper patches `EventLog.append` in its own
process and then runs loopctl's `main`, so no environment variable a user could set by accident
reaches it (issue 18). The kill comes after the record is durable (written and fsynced), as a
power cut or an OOM kill between two events would.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any


def main() -> int:
    target = sys.argv[1]
    from loopctl.journal import events

    append = events.EventLog.append

    def append_then_die(self: events.EventLog, *args: Any, **kwargs: Any) -> events.Event:
        event = append(self, *args, **kwargs)
        if target in (str(event.seq), event.type, f"{event.type}:{event.data.get('what')}"):
            os.kill(os.getpid(), signal.SIGKILL)
        return event

    events.EventLog.append = append_then_die  # type: ignore[method-assign]
    from loopctl.__main__ import main as loopctl_main

    return loopctl_main(sys.argv[2:])


if __name__ == "__main__":
    raise SystemExit(main())
