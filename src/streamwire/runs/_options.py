"""Per-agent options, set in code: ``@agent_options(run_timeout=60)`` above an agent."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final, TypeVar, cast, final

import msgspec

from ..errors import UsageError

__all__ = ["AgentOptions", "agent_options", "check_retries", "check_timeout", "effective_retries",
           "effective_timeout", "options_of"]

A = TypeVar("A", bound=Callable[..., object])

#: The attribute the options live under on an agent.
_ATTRIBUTE: Final = "__streamwire_agent_options__"


@final
class AgentOptions(msgspec.Struct, frozen=True):
    """An agent's own options; None takes the service's (``Runs(..., run_timeout=)``).

    ``run_timeout``: seconds one call of the agent (a start, or a resume) may run before the run
    fails ``TIMEOUT``; ``math.inf`` for none, whatever the service's default.
    ``run_retries``: times a run of the agent whose worker was lost or shut down is run again."""

    run_timeout: float | None = None
    run_retries: int | None = None


def check_timeout(name: str, value: float | None) -> float | None:
    """``value`` as a timeout (None or seconds > 0, ``math.inf`` for none); else ``UsageError``."""
    if value is None:
        return None
    given = cast(object, value)  # a caller without a type checker passes anything
    if isinstance(given, bool) or not isinstance(given, int | float) or not value > 0:
        raise UsageError(f"{name} must be seconds > 0 (or None), not {value!r}")
    return float(value)


def check_retries(name: str, value: int | None) -> int | None:
    """``value`` as a count of retries (None or an int >= 0); else ``UsageError``."""
    if value is None:
        return None
    given = cast(object, value)
    if isinstance(given, bool) or not isinstance(given, int) or value < 0:
        raise UsageError(f"{name} must be an int >= 0 (or None), not {value!r}")
    return value


def agent_options(*, run_timeout: float | None = None,
                  run_retries: int | None = None) -> Callable[[A], A]:
    """Decorate an agent with options of its own::

        @agent_options(run_timeout=120, run_retries=1)
        async def research(run: RunContext[Chat]) -> Completed: ...
    """
    options = AgentOptions(run_timeout=check_timeout("run_timeout", run_timeout),
                           run_retries=check_retries("run_retries", run_retries))

    def mark(agent: A) -> A:
        try:
            setattr(agent, _ATTRIBUTE, options)
        except (AttributeError, TypeError):
            raise UsageError(f"agent_options cannot mark {agent!r}: wrap it in a function"
                             ) from None
        return agent

    return mark


def options_of(agent: object) -> AgentOptions:
    """The options ``agent`` was decorated with (the defaults when none)."""
    options: object = getattr(agent, _ATTRIBUTE, None)
    return options if isinstance(options, AgentOptions) else AgentOptions()


def effective_timeout(agent: object, default: float | None) -> float:
    """Seconds one call of ``agent`` may run (``math.inf``: no limit)."""
    own = options_of(agent).run_timeout
    chosen = own if own is not None else default
    return math.inf if chosen is None else chosen


def effective_retries(agent: object, default: int | None) -> int:
    """Times a run of ``agent`` whose worker was lost or shut down is run again."""
    own = options_of(agent).run_retries
    chosen = own if own is not None else default
    return chosen or 0
