"""Kept importable for tests being written on other branches: new tests import `support.*`."""

from support.model_server import (
    Call,
    Reply,
    Request,
    ScriptedModelServer,
    Turn,
    secret_digest,
    wire_of,
)

__all__ = ["Call", "Reply", "Request", "ScriptedModelServer", "Turn", "secret_digest", "wire_of"]
