"""Text IR -> xDSL module with a lark LALR grammar (grammar.lark).

This mirrors what `xdsl.parser.Parser` reads (MLIR's generic form and the
custom forms irflow prints) but builds each op inside the parser's reduce
callbacks: no parse tree, coarse tokens, caches for repeated types and
attributes.  Errors are `IRParseError`s that point at a line and column.

Semantics follow xDSL's parser so both produce structurally equal modules:
values of enclosing regions are visible in nested regions, names may not be
redefined, a single top-level `builtin.module` is the result, otherwise the
ops are wrapped in an implicit one.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from lark import Lark, Token
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
)
from lark.lexer import PatternStr
from lark.parsers.lalr_analysis import Shift
from lark.parsers.lalr_parser_state import ParseConf, ParserState
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Region

from irflow.errors import IRParseError, SourceLocation
from irflow.gc_paused import gc_paused
from irflow.textir.lexer import TextIRLexer, TokenError, not_ascii, shown
from irflow.textir.verification import first_verify_failure
from irflow.textir.attributes import AttributeBuilder
from irflow.textir.builder import clip, source_lines
from irflow.textir.formats import FormatPlan, format_grammar, format_plan
from irflow.textir.ops import OpBuilder, op_info
from irflow.textir.regions import RegionBuilder

GRAMMAR = Path(__file__).with_name("grammar.lark")

_HUMAN = {
    "VALUE": "an SSA value",
    "VALUES": "SSA values",
    "RESULTS": "result names and '='",
    "OP_NAME": "an operation name",
    "BARE_ID": "an attribute name",
    "BLOCK_ID": "a block label",
    "SYMBOL": "a symbol (@name)",
    "STRING": "a string",
    "INT": "an integer",
    "FLOAT": "a float",
    "BUILTIN_TYPE": "a type",
    "SHAPED_TYPE": "a type",
    "DIALECT_TYPE": "a type",
    "FUNC_TYPE": "a function type",
    "DIALECT_ATTR": "an attribute",
    "DENSE": "a dense<...> attribute",
    "DENSE_ARRAY": "an array<...> attribute",
    "LOC": "a location",
    "VISIBILITY": "a visibility (private, public, nested)",
    "$END": "end of input",
}
_OP_START = {"OP_NAME", "MODULE", "FUNC"}  # and every FORM_* op-name keyword (formats.py)
_ATTR_START = {"INT", "FLOAT", "TRUE", "FALSE", "DENSE", "DENSE_ARRAY", "SYMBOL", "UNIT", "DIALECT_ATTR", "LOC"}
_TYPE_START = {"BUILTIN_TYPE", "SHAPED_TYPE", "DIALECT_TYPE", "FUNC_TYPE"}


class _Builder(OpBuilder, RegionBuilder, AttributeBuilder):
    """The reduce callbacks: they build ops, regions, types and attributes as the text is read."""


# ----------------------------------------------------------------- driver


class _LarkParser:
    """One lark LALR parser with its embedded builder (one per thread: the builder holds parse state)."""

    def __init__(self, plans: list[FormatPlan]) -> None:
        self.builder = _Builder()
        self.builder.format_plans = {p.terminal: p for p in plans}
        self.lark = Lark(
            grammar_text(plans),
            parser="lalr",
            lexer=TextIRLexer,
            transformer=self.builder,
            maybe_placeholders=True,
            propagate_positions=False,
            cache=True,
        )
        self._tables()
        self.human = {t.name: self._describe(t) for t in self.lark.terminals}
        terminals = {t.name: t.pattern.to_regexp() for t in self.lark.terminals}
        types = "|".join(f"(?P<{k}>{terminals[k]})" for k in ("SHAPED_TYPE", "DIALECT_TYPE", "BUILTIN_TYPE"))
        self.builder.function_type_part = re.compile(rf"\s*(?:(?P<arrow>\)\s*->\s*\(?)|[,()]|{types})", re.ASCII)

    def _tables(self) -> None:
        """lark's LALR table as `_run` reads it: per state, each symbol's next state (shift or goto)
        or the rule to reduce by as (length, result symbol, lark's callback for it)."""
        inner = self.lark.parser.parser.parser
        callbacks = inner.callbacks
        assert not any(isinstance(k, str) for k in callbacks), "terminal callbacks are not run by _run"
        self.conf = ParseConf(inner.parse_table, callbacks, "start")
        self.lexer: TextIRLexer = self.lark.parser.lexer
        self.actions: dict[Any, dict[str, Any]] = {
            state: {
                symbol: arg if action is Shift else (len(arg.expansion), arg.origin.name, callbacks[arg])
                for symbol, (action, arg) in row.items()
            }
            for state, row in self.conf.states.items()
        }

    def _run(self, text: str) -> None:
        """lark's LALR loop (`ParserState.feed_token`), specialised: one function, the table
        pre-decoded, no per-token call.  The reductions call the same lark callbacks."""
        state = ParserState(self.conf, None)  # type: ignore[arg-type]
        stack, values = state.state_stack, state.value_stack
        actions, end_state = self.actions, self.conf.end_state
        token = None
        for token in self.lexer.tokens(text, state):
            while True:
                row = actions[stack[-1]]
                action = row.get(token.type)
                if action is None:
                    raise UnexpectedToken(token, {s for s in row if s.isupper()}, state=state)
                if type(action) is not tuple:
                    stack.append(action)
                    values.append(token)
                    break
                size, symbol, callback = action
                if size:
                    children = values[-size:]
                    del stack[-size:]
                    del values[-size:]
                else:
                    children = []
                values.append(callback(children))
                stack.append(actions[stack[-1]][symbol])
        end = Token.new_borrow_pos("$END", "", token) if token is not None else Token("$END", "", 0, 1, 1)
        while stack[-1] != end_state:
            row = actions[stack[-1]]
            action = row.get("$END")
            if action is None:
                raise UnexpectedToken(end, {s for s in row if s.isupper()}, state=state)
            size, symbol, callback = action
            children = values[-size:] if size else []
            if size:
                del stack[-size:]
                del values[-size:]
            values.append(callback(children))
            stack.append(actions[stack[-1]][symbol])

    @staticmethod
    def _describe(term: Any) -> str:
        if term.name in _HUMAN:
            return _HUMAN[term.name]
        if isinstance(term.pattern, PatternStr):
            return f"'{term.pattern.value}'"
        return term.name.lower()

    def expected(self, names: set[str]) -> str:
        names = set(names)
        words: list[str] = []
        op_start = _OP_START | {n for n in names if n.startswith("FORM_")}
        if op_start & names:
            words.append("an operation")
            names -= op_start | {"RESULTS", "STRING"}
        if "INT" in names and "BUILTIN_TYPE" in names:
            words.append("an attribute value")
            names -= _ATTR_START | _TYPE_START | {"STRING", "LSQB", "LBRACE", "LPAR"}
        elif _TYPE_START & names:
            words.append("a type")
            names -= _TYPE_START | {"LPAR"}  # a '(' there starts a function type
        words += sorted({self.human.get(n) or _HUMAN.get(n, n) for n in names} - set(words))
        if len(words) > 8:
            words = words[:8] + ["..."]
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]

    def convert(self, e: UnexpectedInput) -> IRParseError:
        b = self.builder
        if isinstance(e, UnexpectedToken):
            tok = e.token
            if tok.type == "$END":
                got = "end of input"
                where = _end_position(b.text)
            else:
                got = f"'{clip(tok.value)}'"
                where = (tok.line or 1, tok.column or 1)
                after = tok.start_pos + len(tok.value)  # `%a名 =`: the name ends at the letter that is not ASCII
                if not b.text[after : after + 1].isascii():
                    return b._error(not_ascii(b.text[after]), _position(b.text, after))
            return b._error(f"expected {self.expected(e.expected)}, got {got}", where)
        if isinstance(e, UnexpectedCharacters):
            got = b.text[e.pos_in_stream : e.pos_in_stream + 1]
            if not got.isascii():
                return b._error(not_ascii(got), (e.line, e.column))
            return b._error(f"unexpected character {shown(got)}, expected {self.expected(e.allowed)}", (e.line, e.column))
        if isinstance(e, UnexpectedEOF):
            return b._error(
                f"unexpected end of input, expected {self.expected(set(e.expected))}", _end_position(b.text)
            )
        return b._error(str(e), (getattr(e, "line", 1), getattr(e, "column", 1)))

    def parse(self, text: str, filename: str, ctx: Context, verify: bool, implicit_module: bool) -> ModuleOp:
        # The parse allocates millions of objects and frees none, and verification
        # frees nothing cyclic; generational collections over the growing heap
        # would make them superlinear.
        with gc_paused():
            module = self._module(text, filename, ctx, implicit_module)
            if verify and (failure := first_verify_failure(module)) is not None:
                op, e = failure
                raise self.builder._error(f"'{op.name}' op {e}", self.builder.positions.get(op))
            return module

    def _module(self, text: str, filename: str, ctx: Context, implicit_module: bool) -> ModuleOp:
        b = self.builder
        b._reset(ctx, text, filename)
        try:
            self._run(text)
        except UnexpectedInput as e:
            raise self.convert(e) from None
        except IRParseError:
            raise
        except TokenError as e:
            raise b._error(e.message, _position(text, e.offset)) from None
        except Exception as e:  # noqa: BLE001
            # xDSL refusing a construct the grammar accepts (say, an i640 array): still a parse error
            where = self.lexer.last
            raise b._error(f"invalid IR: {type(e).__name__}: {e}", where) from None
        top = b.region_stack[0].blocks[0]
        first = top.first_op
        if first is not None and first is top.last_op and isinstance(first, ModuleOp):
            top.detach_op(first)
            return first
        if implicit_module:
            return ModuleOp(Region(top))
        raise b._error("expected a single builtin.module at the top level", b.positions.get(first))  # type: ignore[arg-type]


def format_plans(ctx: Context) -> list[FormatPlan]:
    """Plans for `ctx`'s loaded ops whose assembly format is not the shared plain form.

    Dialects only registered are not loaded for this: irflow-opt registers all
    of xDSL's, and loading them cost seconds at start-up.
    """
    return [plan for cls in ctx.loaded_ops if op_info(cls).form is None and (plan := format_plan(cls)) is not None]


def grammar_text(plans: list[FormatPlan] | None = None) -> str:
    """grammar.lark with `format_op` made from the default context's ops' formats (or from `plans`)."""
    return GRAMMAR.read_text() + format_grammar(format_plans(default_context()) if plans is None else plans)


def _position(text: str, offset: int) -> tuple[int, int]:
    """The line and column of `offset` in `text`."""
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


def _end_position(text: str) -> tuple[int, int]:
    """Where the input ends: after its last line, not on the empty one a final newline starts."""
    lines = source_lines(text.removesuffix("\n"))
    return len(lines), len(lines[-1]) + 1


_local = threading.local()
_plans: dict[tuple[int, tuple[str, ...]], tuple[Context, list[FormatPlan]]] = {}


def _parser(ctx: Context) -> _LarkParser:
    """This thread's parser for the op formats of `ctx`'s dialects (one per distinct set of formats)."""
    key = (id(ctx), len(ctx.loaded_ops), len(ctx.registered_dialect_names))  # type: ignore[arg-type]
    entry = _plans.get(key)
    if entry is None or entry[0] is not ctx:
        if len(_plans) >= 16:  # contexts are few; never let made-and-dropped ones pile up
            _plans.clear()
        entry = _plans[key] = (ctx, format_plans(ctx))
    plans = entry[1]
    parsers: dict[tuple[str, ...], _LarkParser] = _local.__dict__.setdefault("parsers", {})
    forms = tuple(sorted(p.assembly_format + p.op_name for p in plans))
    parser = parsers.get(forms)
    if parser is None:
        parser = parsers[forms] = _LarkParser(plans)
    return parser


_default_ctx: Context | None = None


def default_context() -> Context:
    global _default_ctx
    if _default_ctx is None:
        from irflow.context import make_context

        _default_ctx = make_context()
    return _default_ctx


def decode_source(data: bytes, filename: str = "<string>") -> str:
    """Text IR bytes as a string; input that is not UTF-8 is an `IRParseError` at the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        line_start = data.rfind(b"\n", 0, e.start) + 1
        column = len(data[line_start : e.start].decode("utf-8", "replace")) + 1
        source = data[line_start:].split(b"\n", 1)[0].decode("utf-8", "replace")
        raise IRParseError(
            f"input is not valid UTF-8: byte 0x{data[e.start]:02x} cannot start or continue a character",
            SourceLocation(filename, line, column),
            source,
        ) from None


def parse_module(
    text: str,
    filename: str = "<string>",
    *,
    ctx: Context | None = None,
    verify: bool = True,
    implicit_module: bool = True,
) -> ModuleOp:
    """Parse irflow's text IR into a verified `builtin.module`; raise `IRParseError` on bad input.

    Ops outside a single top-level `builtin.module` are wrapped in one, unless
    `implicit_module` is False.  `ctx` defaults to `irflow.context.make_context()`.
    """
    ctx = ctx or default_context()
    return _parser(ctx).parse(text, filename, ctx, verify, implicit_module)
