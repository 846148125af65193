"""The state shared by the parser's reduce callbacks: caches, scopes, and errors at a line and column.

The callbacks themselves live by concern in `ops`, `regions` and `attributes`;
`parser._Builder` combines them into the transformer lark runs inside its parser.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lark import Token, Transformer
from xdsl.context import Context
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.builtin import FunctionType, IntAttr
from xdsl.ir import (
    Attribute,
    Block,
    Operation,
    SSAValue,
)
from xdsl.parser import AttrParser, Parser
from xdsl.utils.exceptions import ParseError, VerifyException

from irflow.errors import IRParseError, SourceLocation

if TYPE_CHECKING:
    from irflow.textir.ops import OpInfo


_ESCAPES = {"n": b"\n", "t": b"\t", "\\": b"\\", '"': b'"'}


def unescape(literal: str) -> str:
    """The value of an MLIR string literal (quotes included): \\n \\t \\\\ \\" and \\XX hex escapes."""
    body = literal[1:-1]
    if "\\" not in body:
        return body
    out = bytearray()
    i = 0
    while (j := body.find("\\", i)) >= 0:
        out += body[i:j].encode()
        c = body[j + 1 : j + 2]
        if c in _ESCAPES:
            out += _ESCAPES[c]
            i = j + 2
        else:
            out.append(int(body[j + 1 : j + 3], 16))
            i = j + 3
    out += body[i:].encode()
    return out.decode("utf-8")


@dataclass
class ParsedRegion:
    """A region being parsed: its blocks, labels and the values it defines."""

    blocks: list[Block]
    keep_entry: bool
    labels: dict[str, tuple[Block, bool]] = field(default_factory=dict)  # name -> (block, defined)
    forward: dict[str, Token] = field(default_factory=dict)


class BuilderBase(Transformer):
    """Parse state and the helpers every callback uses."""

    def __init__(self) -> None:
        self.ctx: Context = Context()
        self._caches_for: Context | None = None
        self._reset(self.ctx, "", "<string>")

    # -- state

    def _reset(self, ctx: Context, text: str, filename: str) -> None:
        if ctx is not self._caches_for:
            self._caches_for = ctx
            self.op_cache: dict[str, OpInfo] = {}
        # Values are cached per parse: a module repeats its types and attributes,
        # while keeping them across parses would grow without bound.
        self.type_cache: dict[str, Attribute] = {}
        self.attr_cache: dict[Any, Attribute] = {}
        self.loc_cache: dict[str, Attribute] = {}
        self.hint_cache: dict[str, str | None] = {}
        self.int_cache: dict[int, IntAttr] = {}
        self.ftype_cache: dict[tuple[tuple[Attribute, ...], tuple[Attribute, ...]], FunctionType] = {}
        self.resources = ResourceHandles(ctx)
        self.ctx = ctx
        self.text = text
        self.filename = filename
        self.positions: dict[Operation, tuple[int, int]] = {}
        top = Block()
        self.region_stack = [ParsedRegion([top], keep_entry=True)]
        self.current_block = top
        self.scopes: list[dict[str, SSAValue]] = [{}]
        self.pending_entry: tuple[Block, list[Token]] | None = None

    # -- errors

    def _error(self, message: str, where: Token | tuple[int, int] | None, offset: int = 0) -> IRParseError:
        if where is None:
            line, col = 1, 1
        elif isinstance(where, Token):
            line, col = where.line or 1, (where.column or 1) + offset
        else:
            line, col = where
        return IRParseError(message, SourceLocation(self.filename, line, col), source_line(self.text, line))

    def _unescape(self, literal: str, tok: Token) -> str:
        """`unescape(literal)`, or an error at `tok` where its bytes are not UTF-8 (`"\\FF"`)."""
        try:
            return unescape(literal)
        except UnicodeDecodeError:
            raise self._error("string is not valid UTF-8", tok) from None

    def _xdsl_attribute(
        self, tok: Token, what: str, parse: Callable[[AttrParser], Attribute | None], text: str | None = None
    ) -> Attribute:
        """Parse one coarse token with xDSL's attribute parser (dialect attributes, exotic builtins)."""
        text = str(tok) if text is None else text
        self._check_int_widths(tok)
        parser = Parser(self.ctx, text)
        parser.dialect_resources = self.resources
        try:
            attr = parse(parser)
            if attr is None or parser.pos != len(text):
                raise self._error(f"invalid {what} '{clip(text)}'", tok)
            return attr
        except ParseError as e:
            raise self._error(f"invalid {what} '{clip(text)}': {e.msg}", tok) from None
        except VerifyException as e:
            raise self._error(f"invalid {what} '{tok}': {e}", tok) from None
        except IRParseError:
            raise
        except Exception:  # noqa: BLE001 - xDSL asserts on some input (`dense<1> : tensor<2xcomplex<f32>>`)
            raise self._error(f"invalid {what} '{clip(text)}': xDSL's attribute parser cannot read it", tok) from None


class ResourceHandles(set[tuple[str, str]]):
    """The resource handles (`dense_resource<key>`) of one parse, shared by its xDSL attribute parsers.

    A key already declared, by this parse or an earlier one (xDSL keeps
    resources per dialect object, for the whole process), names that
    resource: equal keys are one resource, as MLIR reads them.  xDSL's own
    parser renames a known key `key_0`, then `key_1` at its next use, so
    printed IR would not read back as itself.
    """

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx

    def __contains__(self, item: object) -> bool:
        if super().__contains__(item):
            return True
        dialect, key = item  # type: ignore[misc]
        interface = self.ctx.get_dialect(dialect).get_interface(OpAsmDialectInterface)
        return interface is not None and interface.lookup(key) is not None


_VALUE_IN_LIST = re.compile(r"%[A-Za-z0-9_$.\-]+")


def nth_value(tok: Token, index: int) -> tuple[tuple[int, int]]:
    """Line and column of the `index`-th `%name` inside a list token such as `%a, %b =`."""
    start = [m.start() for m in _VALUE_IN_LIST.finditer(tok.value)][index]
    before = tok.value[:start]
    lines = before.count("\n")
    col = start - before.rfind("\n") if lines else (tok.column or 1) + start
    return (((tok.line or 1) + lines, col),)


def source_lines(text: str) -> list[str]:
    r"""`text`'s lines as the lexer numbers them: only `\n` ends a line, as in MLIR.

    `str.splitlines` also breaks at `\r`, `\f`, `\x1c`-`\x1e`, `\x85`,
    `\u2028` and `\u2029`, which may stand in comments, strings and
    whitespace; breaking there would show, and at the end of the input
    number, the wrong line.  A CRLF line's `\r` is not part of it.
    """
    return [line.removesuffix("\r") for line in text.split("\n")]


def source_line(text: str, line: int) -> str | None:
    """Line `line` (1-based) of `text`, numbered as `source_lines` numbers them."""
    lines = source_lines(text)
    return lines[line - 1] if 0 < line <= len(lines) else None


def clip(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."
