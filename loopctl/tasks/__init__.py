"""Where a tick's work comes from: one task, a command's JSON output, or GitHub issues and PRs."""
