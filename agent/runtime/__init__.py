"""The agent runtime: the report loop, workers launched with their environment, restarts."""

from .container import ContainerRuntimes, container_command
from .launch import choose_launcher
from .loop import Agent, LoopConfig
from .main import main
from .runner import Runner, RunnerConfig
from .state import Outbox, StateDir

__all__ = [
    "Agent",
    "ContainerRuntimes",
    "LoopConfig",
    "Outbox",
    "Runner",
    "RunnerConfig",
    "StateDir",
    "choose_launcher",
    "container_command",
    "main",
]
