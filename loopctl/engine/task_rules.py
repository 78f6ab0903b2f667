"""The rules block a task's turns carry (issue 31, item 2): the maker's prompt, and the checker's.

A checker agent is a CLI too: it calls tools and may compact its context. Its prompt carries the
same block as the maker's (what the maker was held to is part of what it judges), so every
request of the task that can lead to a tool call names the current rules hash.
"""

from __future__ import annotations

from loopctl.definitions.scope import rule_lines
from loopctl.engine.context import RunContext
from loopctl.engine.footprint import task_scope
from loopctl.engine.rules import RulesBlock, rules_block
from loopctl.tasks.spec import TaskSpec


def task_rules(ctx: RunContext, spec: TaskSpec) -> RulesBlock:
    """The loop's rules for `spec`'s maker: its instructions, the loop's rules, the protected
    paths, the maker's scope, the task's declared [scope] and the skill index."""
    return rules_block(
        instructions=ctx.maker.instructions,
        rules=ctx.loop.rules,
        protected=ctx.protected,
        scope=ctx.loop.maker.scope,
        skills=list(ctx.project.skills.values()),
        declared=rule_lines(task_scope(ctx, spec)),
    )
