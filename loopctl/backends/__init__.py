"""Agent backends behind one interface; the engine asks `backend_for(agent)`."""

from __future__ import annotations

from loopctl.backends.base import AgentBackend, AgentRequest, AgentResult, AgentStatus
from loopctl.definitions.agents import Agent, Backend
from loopctl.errors import AgentUnavailable

__all__ = ["AgentBackend", "AgentRequest", "AgentResult", "AgentStatus", "backend_for"]


def backend_for(agent: Agent) -> AgentBackend:
    """The backend that runs `agent`, or AgentUnavailable saying why it cannot."""
    if agent.backend is Backend.COMMAND:
        from loopctl.backends.command import CommandBackend

        return CommandBackend()
    raise AgentUnavailable(
        f"agent {agent.name!r} uses backend {agent.backend.value!r}, which this version of"
        ' loopctl cannot drive yet; use backend = "command" with an argv'
    )
