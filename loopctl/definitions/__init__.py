"""Definitions a user writes — loops, agents, skills, config — parsed into frozen dataclasses."""

from loopctl.definitions.agents import Agent, Backend
from loopctl.definitions.config import Budget, Config, KeepPolicy
from loopctl.definitions.loops import Loop, TaskSource, Trigger, TriggerKind
from loopctl.definitions.project import Project, load_project
from loopctl.definitions.skills import Skill

__all__ = [
    "Agent",
    "Backend",
    "Budget",
    "Config",
    "KeepPolicy",
    "Loop",
    "Project",
    "Skill",
    "TaskSource",
    "Trigger",
    "TriggerKind",
    "load_project",
]
