"""loopctl's own small tool-using agent, driven over a model API (backends openai, anthropic)."""

from __future__ import annotations

from loopctl.toolagent.session import SessionConfig, SessionResult, run_session

__all__ = ["SessionConfig", "SessionResult", "run_session"]
