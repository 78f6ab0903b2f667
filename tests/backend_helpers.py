"""Kept importable for tests being written on other branches: new tests import `support.*`."""

from support.backends import (
    CLIS,
    FAKES,
    anthropic_reply,
    fake_calls,
    fake_home,
    install_fake_clis,
    make_agent,
    make_request,
    openai_reply,
    own_agent_fixes_calc,
    reply_for,
    set_scenario,
)

__all__ = [
    "CLIS",
    "FAKES",
    "anthropic_reply",
    "fake_calls",
    "fake_home",
    "install_fake_clis",
    "make_agent",
    "make_request",
    "openai_reply",
    "own_agent_fixes_calc",
    "reply_for",
    "set_scenario",
]
