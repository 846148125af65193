"""Helpers for the memplan tests: an independent brute-force optimum and the shared profiles."""

import itertools
from pathlib import Path

import pytest

from irflow.memplan import Buffer

# The shared benchmark inputs sit beside the repository: /work/shared here, <repo>/../shared in CI.
PROFILES = Path(__file__).resolve().parents[2].parent / "shared" / "benchmarks" / "memplan"


def brute_force_optimum(buffers: list[Buffer]) -> int:
    """Smallest arena, by first fit in every order.

    First fit in the order of an optimal plan's offsets never places a buffer
    above its offset there (everything below it only moved down), so the best
    order reaches the optimum.  Shares no code with the planner.
    """
    best = None
    for order in itertools.permutations(range(len(buffers))):
        placed: list[tuple[int, int, int]] = []  # (offset, end, buffer)
        top = 0
        for i in order:
            b = buffers[i]
            at = 0
            for lo, hi, j in sorted(placed):
                c = buffers[j]
                if c.first <= b.last and b.first <= c.last and lo < at + b.size and at < hi:
                    at = hi
            placed.append((at, at + b.size, i))
            top = max(top, at + b.size)
        best = top if best is None else min(best, top)
    return best or 0


@pytest.fixture
def optimum():
    """brute_force_optimum, for tests (conftest is not importable under importlib mode)."""
    return brute_force_optimum


@pytest.fixture
def profile():
    """read_profile of a shared CSV by name; skips when the shared directory is absent."""
    from irflow.memplan.instances import read_profile

    def load(name: str) -> list[Buffer]:
        path = PROFILES / f"{name}.csv"
        if not path.exists():
            pytest.skip(f"shared profiles not found at {PROFILES}")
        return read_profile(path)

    return load


@pytest.fixture
def calls(monkeypatch):
    """calls(module, name): a list that gets the arguments of every call to module.name from then on."""

    def record(module, name: str) -> list[tuple]:
        made: list[tuple] = []
        real = getattr(module, name)

        def counted(*args, **kwargs):
            made.append(args)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
        return made

    return record
