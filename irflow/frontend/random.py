"""flow.random.seed: the seed of the default session's variable initialization."""

from __future__ import annotations

from irflow.frontend.session import default_session


def seed(value: int) -> None:
    """Same seed, same initial variables: set it before a job's first call."""
    default_session().set_seed(value)
