"""Helpers the tests share, grouped by what they stand in for.

- `repos`: the one `git()` for test set-up, the calc project with fake agents, remotes, worktrees;
- `cli`: running loopctl in this process (`invoke`) or as a real subprocess;
- `processes`: waiting without sleeping, pids across the sandbox's namespaces, long-lived CLIs;
- `journal`: reading the event log and waiting for an event;
- `delivery`: loops that deliver, recorded custom actions, the inbox as JSON;
- `fake_gh`: a fake `gh` on PATH that records its calls;
- `backends`, `model_server`: fake agent CLIs and a scripted model API on 127.0.0.1.
"""
