"""The event log and what is folded from it: history, budgets, inbox, STATE.md, notices, traces."""
