"""Per-op tables that passes fill with decorators: one rule per op class, registered once."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from xdsl.ir import Operation

R = TypeVar("R")


def registrar(table: dict[type[Operation], R], what: str) -> Callable[..., Callable[[R], R]]:
    """A decorator factory: `@register(job.AddOp, job.SubOp)` puts the rule in `table` for each class."""

    def register(*op_classes: type[Operation]) -> Callable[[R], R]:
        def add(rule: R) -> R:
            for cls in op_classes:
                assert cls not in table, f"{cls.name} has two {what}"
                table[cls] = rule
            return rule

        return add

    return register
