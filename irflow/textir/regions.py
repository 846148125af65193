"""Reduce callbacks for SSA values, blocks and regions: scopes, labels, forward references to blocks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lark import Token
from xdsl.ir import (
    Attribute,
    Block,
    Region,
    SSAValue,
)

from irflow.textir.builder import BuilderBase, ParsedRegion, nth_value

_VALUE_NAME = re.compile(r"[A-Za-z_$.\-][A-Za-z0-9_$.\-]*")


def is_value_name(name: str) -> bool:
    """Whether `%name` prints and reads back: xDSL's rule for a name hint, in ASCII as all IR text is.

    xDSL's own check (`SSAValue.is_valid_name`) takes any script's letters and
    digits after the first character (`w权重`), which no MLIR parser reads.
    """
    return _VALUE_NAME.fullmatch(name) is not None


class RegionBuilder(BuilderBase):
    """Values are defined into the innermost scope; a region opens a scope on `{`, before its ops."""

    # -- values and blocks

    def _define(self, name: str, value: SSAValue, tok: Token, index: int = 0) -> None:
        """Bind `name` (`x`, or `x#i` for a result group `%x:n`) in the innermost scope.

        `tok` holds the definition, as the `index`-th name of a list token.
        """
        for scope in self.scopes:
            if name in scope:
                raise self._error(f"redefinition of value %{name}", *nth_value(tok, index))
        self.scopes[-1][name] = value
        hint = self.hint_cache.get(name, False)
        if hint is False:
            base = name.partition("#")[0]
            hint = self.hint_cache[name] = SSAValue.extract_valid_name(base) if SSAValue.is_valid_name(base) else None
        if hint is not None:
            value.name_hint = hint

    def _resolve(self, uses: Token | None, types: Sequence[Attribute], at: Token) -> list[SSAValue]:
        """The values a `%a, %b#1` token names, checked against the types the op declares for them."""
        names = [part.strip()[1:] for part in uses.value.split(",")] if uses is not None else []
        if len(names) != len(types):
            raise self._error(f"{len(names)} operands but {len(types)} operand types", at)
        values = []
        scopes = self.scopes
        for i, (name, expected) in enumerate(zip(names, types)):
            for scope in reversed(scopes):
                value = scope.get(name)
                if value is not None:
                    break
            else:
                value = self._lookup(name.removesuffix("#0")) if name.endswith("#0") else None
                if value is None:
                    raise self._error(f"use of undefined value %{name}", *nth_value(uses, i))  # type: ignore[arg-type]
            if value.type != expected:
                raise self._error(
                    f"value %{name} has type {value.type}, but is used as {expected}",
                    *nth_value(uses, i),  # type: ignore[arg-type]
                )
            values.append(value)
        return values

    def _lookup(self, name: str) -> SSAValue | None:
        for scope in reversed(self.scopes):
            if (value := scope.get(name)) is not None:
                return value
        return None

    def _block_named(self, tok: Token) -> tuple[Block, bool]:
        region = self.region_stack[-1]
        name = tok[1:]
        entry = region.labels.get(name)
        if entry is None:
            block = Block()
            if not Block.is_default_block_name(name):
                block.name_hint = name
            entry = region.labels[name] = (block, False)
            region.forward[name] = tok
        return entry

    # -- regions and blocks

    def region_open(self, children: list[Any]) -> None:
        pending, self.pending_entry = self.pending_entry, None
        scope: dict[str, SSAValue] = {}
        self.scopes.append(scope)
        if pending is not None:
            block, names = pending
            for tok, arg in zip(names, block.args):
                self._define(tok[1:], arg, tok)
            self.region_stack.append(ParsedRegion([block], keep_entry=True))
        else:
            block = Block()
            self.region_stack.append(ParsedRegion([block], keep_entry=False))
        self.current_block = block

    def region(self, children: list[Any]) -> Region:
        state = self.region_stack.pop()
        self.scopes.pop()
        if state.forward:
            name, tok = next(iter(state.forward.items()))
            raise self._error(f"block ^{name} is used but never defined in this region", tok)
        blocks = state.blocks
        if not state.keep_entry and blocks[0].first_op is None:
            blocks = blocks[1:]
        self.current_block = self.region_stack[-1].blocks[-1]
        return Region(blocks)

    def blocks(self, children: list[Any]) -> None:
        return None

    def block(self, children: list[Any]) -> None:
        return None

    def block_label(self, children: list[Any]) -> None:
        tok, args = children
        region = self.region_stack[-1]
        if (
            region.keep_entry
            and len(region.blocks) == 1
            and region.blocks[0].first_op is None
            and self.region_stack[0] is not region
        ):
            raise self._error("the entry block of a region with named arguments cannot have a label", tok)
        name = tok[1:]
        block, defined = self._block_named(tok)
        if defined:
            raise self._error(f"redefinition of block ^{name}", tok)
        region.labels[name] = (block, True)
        region.forward.pop(name, None)
        for i, (arg_tok, type, loc) in enumerate(args or ()):
            arg = block.insert_arg(type, i, self._loc(loc) if loc is not None else None)
            self._define(arg_tok[1:], arg, arg_tok)
        region.blocks.append(block)
        self.current_block = block

    def block_args(self, children: list[Any]) -> list[Any]:
        args = children
        return [a for a in args if a is not None]

    def block_arg(self, children: list[Any]):
        tok, type, loc = children
        return tok, type, loc
