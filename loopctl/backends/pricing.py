"""Cost in USD for backends that report only tokens, from `[prices."model"]` in the config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from loopctl.backends.base import AgentResult
from loopctl.definitions.agents import Agent
from loopctl.definitions.config import Price


def _candidates(model: str) -> list[str]:
    # Claude reports "claude-opus-4-8[1m]", opencode "anthropic/claude-sonnet-4-5": a price
    # written for the plain name should still apply.
    names = [model, model.split("[", 1)[0], model.rsplit("/", 1)[-1]]
    return list(dict.fromkeys(name for name in names if name))


def find_price(models: list[str], prices: Mapping[str, Price]) -> tuple[str, Price] | None:
    for model in models:
        for name in _candidates(model):
            if name in prices:
                return name, prices[name]
    return None


def cost_of(price: Price, input_tokens: int, output_tokens: int, cached_tokens: int) -> float:
    cached = min(max(cached_tokens, 0), input_tokens)
    cached_rate = price.cached_input if price.cached_input is not None else price.input
    usd = (
        (input_tokens - cached) * price.input + cached * cached_rate + output_tokens * price.output
    )
    return round(usd / 1_000_000, 8)


def priced(result: AgentResult, agent: Agent, prices: Mapping[str, Price]) -> AgentResult:
    """`result` with its cost filled in from the price table, or a note saying why it is unknown."""
    if result.cost_usd is not None:
        if "cost_source" in result.extra:
            return result
        return replace(result, extra={**result.extra, "cost_source": "backend"})
    reported = result.extra.get("model")
    models = [m for m in (reported, agent.model) if isinstance(m, str) and m]
    if result.input_tokens is None and result.output_tokens is None:
        note = f"cost unknown: backend {agent.backend.value} reported no tokens"
        return replace(result, extra={**result.extra, "cost_note": note})
    found = find_price(models, prices)
    if found is None:
        shown = models[0] if models else "MODEL"
        note = (
            f"cost unknown: backend {agent.backend.value} reports no cost; add"
            f' [prices."{shown}"] input = …, output = … (USD per million tokens)'
            " to .loop/config.toml"
        )
        return replace(result, extra={**result.extra, "cost_note": note})
    name, price = found
    usd = cost_of(
        price, result.input_tokens or 0, result.output_tokens or 0, result.cached_tokens or 0
    )
    return replace(result, cost_usd=usd, extra={**result.extra, "cost_source": f"prices.{name}"})
