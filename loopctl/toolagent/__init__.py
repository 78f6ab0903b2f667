"""loopctl's own small tool-using agent, driven over a model API (backends openai, anthropic).

The package imports nothing itself: the engine reads `toolagent.wire` (an agent's key variable)
for every run, and the session with its client, MCP and asyncio is for a model-API agent only.
"""

from __future__ import annotations
