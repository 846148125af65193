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

import gc
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
)
from lark.lexer import PatternStr
from xdsl.context import Context
from xdsl.dialects.builtin import (
    UNKNOWN_LOC,
    AnyFloat,
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FileLineColLoc,
    Float16Type,
    Float32Type,
    Float64Type,
    Float80Type,
    Float128Type,
    FloatAttr,
    FunctionType,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneType,
    Signedness,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    UnitAttr,
    UnknownLoc,
    VectorType,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, VarOperandDef
from xdsl.parser import AttrParser, Parser
from xdsl.utils.exceptions import ParseError, VerifyException

from irflow.errors import IRParseError, SourceLocation
from irflow.textir.lexer import TextIRLexer, TokenError
from irflow.textir.verification import first_verify_failure

GRAMMAR = Path(__file__).with_name("grammar.lark")

# ----------------------------------------------------------------- plain op forms

FUNCTIONAL, OPERAND_TYPES, RESULT_TYPES, ARROW = "functional", "operand-types", "result-types", "arrow"

_VARS = r"(?:operands|\$\w+(?:`,`\$\w+)*)"
_PLAIN_FORMS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(_VARS + r"?attr-dict`:`functional-type\((?:operands|\$\w+),(?:results|\$\w+)\)"), FUNCTIONAL),
    (re.compile(r"attr-dict`:`type\((?:results|\$\w+)\)"), RESULT_TYPES),
    (re.compile(_VARS + r"attr-dict`:`type\((?:operands|\$\w+)\)(?:`,`type\(\$\w+\))*"), OPERAND_TYPES),
    (re.compile(r"attr-dict\(\$\w+\^`:`type\(\$\w+\)\)\?"), OPERAND_TYPES),
    (re.compile(r"\$\w+attr-dict`:`type\(\$\w+\)`->`type\(\$\w+\)"), ARROW),
]


@dataclass(frozen=True)
class OpInfo:
    """How the shared plain form maps onto one op class."""

    cls: type[Operation]
    form: str | None  # None: the op has no plain custom form
    props_in_dict: frozenset[str]


def op_info(cls: type[Operation]) -> OpInfo:
    if not issubclass(cls, IRDLOperation):
        return OpInfo(cls, None, frozenset())
    op_def = cls.get_irdl_definition()
    in_dict = (
        frozenset(op_def.properties) if any(isinstance(o, ParsePropInAttrDict) for o in op_def.options) else frozenset()
    )
    fmt = op_def.assembly_format
    if fmt is None:
        return OpInfo(cls, None, in_dict)
    compact = re.sub(r"\s+", "", fmt)
    form = next((f for pattern, f in _PLAIN_FORMS if pattern.fullmatch(compact)), None)
    # operands must be named in definition order and at most one may be variadic
    named = re.findall(r"\$(\w+)", compact.split("attr-dict")[0])
    operand_names = [name for name, _ in op_def.operands]
    if named and named != operand_names:
        form = None
    if sum(isinstance(d, VarOperandDef) for _, d in op_def.operands) > 1:
        form = None
    reserved = set(re.findall(r"\$(\w+)", compact))
    return OpInfo(cls, form, frozenset(p for p in in_dict if p not in reserved))


# ----------------------------------------------------------------- scalar tables

_FLOATS: dict[str, Attribute] = {
    "bf16": BFloat16Type(),
    "f16": Float16Type(),
    "f32": Float32Type(),
    "f64": Float64Type(),
    "f80": Float80Type(),
    "f128": Float128Type(),
}
_INT_TYPE = re.compile(r"([su]?)i(\d+)")
_SIGNEDNESS = {"": Signedness.SIGNLESS, "s": Signedness.SIGNED, "u": Signedness.UNSIGNED}
_SHAPED_FAST = re.compile(r"(tensor|memref)<((?:\d+x)*)([su]?i\d+|bf16|f16|f32|f64|index)>")
_LOC_FILE = re.compile(r'loc\(("[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"):(\d+):(\d+)\)')
_SYMBOL_PART = re.compile(r'@([A-Za-z_][\w$.]*|"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+")')
_DENSE_TOKEN = re.compile(r"\s*(?:(\[)|(\])|(,)|(true|false)|(-?(?:0x[0-9A-Fa-f]+|\d+(?:\.\d*(?:[eE][+\-]?\d+)?)?)))")
_MAX_INT_WIDTH = (1 << 24) - 1  # MLIR's limit; `1 << width` for a wider type exhausts memory
_WIDE_INT = re.compile(r"(?<![\w$.])[su]?i(\d{8,})(?![\w$.])")
_MAX_SPLAT = 1 << 24  # elements a `dense<x> : tensor<...>` splat may expand to

_ESCAPES = {"n": b"\n", "t": b"\t", "\\": b"\\", '"': b'"'}


class _Bits(int):
    """A hexadecimal literal: for a float element it is the bit pattern, as in MLIR (`0x7FC00000 : f32`)."""


def _float(value: object, type: AnyFloat) -> float:
    if isinstance(value, _Bits):
        return next(type.iter_unpack(int(value).to_bytes(type.compile_time_size, "little")))
    return float(value)  # type: ignore[arg-type]


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


# ----------------------------------------------------------------- the lark parser


@dataclass
class _Region:
    """A region being parsed: its blocks, labels and the values it defines."""

    blocks: list[Block]
    keep_entry: bool
    labels: dict[str, tuple[Block, bool]] = field(default_factory=dict)  # name -> (block, defined)
    forward: dict[str, Token] = field(default_factory=dict)


class _Unsupported(Exception):
    """A coarse token the fast paths do not handle: ask xDSL's attribute parser."""


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
_OP_START = {"OP_NAME", "MODULE", "FUNC", "JOB_FUNC", "PROGRAM", "KERNEL", "CALL"}
_ATTR_START = {"INT", "FLOAT", "TRUE", "FALSE", "DENSE", "DENSE_ARRAY", "SYMBOL", "UNIT", "DIALECT_ATTR", "LOC"}
_TYPE_START = {"BUILTIN_TYPE", "SHAPED_TYPE", "DIALECT_TYPE", "FUNC_TYPE"}


class _Builder(Transformer):
    """The reduce callbacks: they build ops, regions, types and attributes as the text is read."""

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
        self.ctx = ctx
        self.text = text
        self.filename = filename
        self.positions: dict[Operation, tuple[int, int]] = {}
        top = Block()
        self.region_stack = [_Region([top], keep_entry=True)]
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
        lines = self.text.splitlines()
        source = lines[line - 1] if 0 < line <= len(lines) else None
        return IRParseError(message, SourceLocation(self.filename, line, col), source)

    def _xdsl_attribute(
        self, tok: Token, what: str, parse: Callable[[AttrParser], Attribute | None], text: str | None = None
    ) -> Attribute:
        """Parse one coarse token with xDSL's attribute parser (dialect attributes, exotic builtins)."""
        text = str(tok) if text is None else text
        self._check_int_widths(tok)
        parser = Parser(self.ctx, text)
        try:
            attr = parse(parser)
            if attr is None or parser.pos != len(text):
                raise self._error(f"invalid {what} '{_clip(text)}'", tok)
            return attr
        except ParseError as e:
            raise self._error(f"invalid {what} '{_clip(text)}': {e.msg}", tok) from None
        except VerifyException as e:
            raise self._error(f"invalid {what} '{tok}': {e}", tok) from None

    # -- values and blocks

    def _define(self, name: str, value: SSAValue, tok: Token, index: int = 0) -> None:
        """Bind `name` (`x`, or `x#i` for a result group `%x:n`) in the innermost scope.

        `tok` holds the definition, as the `index`-th name of a list token.
        """
        for scope in self.scopes:
            if name in scope:
                raise self._error(f"redefinition of value %{name}", *_nth_value(tok, index))
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
                    raise self._error(f"use of undefined value %{name}", *_nth_value(uses, i))  # type: ignore[arg-type]
            if value.type != expected:
                raise self._error(
                    f"value %{name} has type {value.type}, but is used as {expected}",
                    *_nth_value(uses, i),  # type: ignore[arg-type]
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

    # -- ops

    def _op_class(self, name: str, tok: Token) -> OpInfo:
        info = self.op_cache.get(name)
        if info is None:
            cls = self.ctx.get_optional_op(name)
            if cls is None:
                raise self._error(f"unknown operation '{name}'", tok)
            info = self.op_cache[name] = op_info(cls)
        return info

    def _create(self, tok: Token, cls: type[Operation], **parts: Any) -> Operation:
        return self._build(tok, cls.name, lambda: cls.create(location=UNKNOWN_LOC, **parts))

    def _build(self, tok: Token, name: str, make: Callable[[], Operation]) -> Operation:
        """`make()`'s op, remembered at `tok` for verifier messages; a refusal is an error there."""
        try:
            op = make()
        except (ValueError, TypeError, KeyError, VerifyException) as e:
            raise self._error(f"cannot build '{name}': {e}", tok) from None
        self.positions[op] = (tok.line or 1, tok.column or 1)
        return op

    def _finish(self, op: Operation, loc: Token | None) -> None:
        if loc is not None:
            op.location = self._loc(loc)
        self.current_block.add_op(op)

    def _split(
        self, info: OpInfo, entries: dict[str, Attribute] | None
    ) -> tuple[dict[str, Attribute], dict[str, Attribute]]:
        if not entries:
            return {}, {}
        props, attrs = {}, {}
        for k, v in entries.items():
            (props if k in info.props_in_dict else attrs)[k] = v
        return props, attrs

    def start(self, children: list[Any]) -> None:
        return None

    def ops(self, children: list[Any]) -> None:
        return None

    def op_with_results(self, children: list[Any]) -> None:
        """`%a, %b:2 = op`: one token, whose names bind the op's results in order."""
        results, op, loc = children
        slots: list[tuple[str, int]] = []
        for i, part in enumerate(results.value[:-1].split(",")):
            base, _, count = part.strip()[1:].partition(":")
            slots += [(f"{base}#{k}", i) for k in range(int(count))] if count else [(base, i)]
        if len(op.results) != len(slots):
            raise self._error(f"'{op.name}' has {len(op.results)} results, but {len(slots)} names are bound", results)
        for (name, i), value in zip(slots, op.results):
            self._define(name, value, results, i)
        self._finish(op, loc)

    def op_without_results(self, children: list[Any]) -> None:
        op, loc = children
        self._finish(op, loc)

    def generic_op(self, children: list[Any]) -> Operation:
        name, uses, successors, props, regions, attrs, ftype = children
        info = self._op_class(unescape(name), name)
        props = dict(props or {})
        attrs = dict(attrs or {})
        if issubclass(info.cls, IRDLOperation):
            # as xDSL: properties may still be written in the attribute dictionary
            for p in info.cls.get_irdl_definition().properties:
                if p in attrs and p not in props:
                    props[p] = attrs.pop(p)
        return self._create(
            name,
            info.cls,
            operands=self._resolve(uses, ftype.inputs.data, name),
            result_types=ftype.outputs.data,
            properties=props,
            attributes=attrs,
            successors=successors or (),
            regions=regions or (),
        )

    def generic_name(self, children: list[Any]) -> Token:
        (tok,) = children
        self._op_class(unescape(tok), tok)
        return tok

    def successors(self, children: list[Any]) -> list[Block]:
        toks = children
        return [self._block_named(t)[0] for t in toks]

    def properties(self, children: list[Any]) -> dict[str, Attribute]:
        (d,) = children
        return d

    def regions(self, children: list[Any]) -> list[Region]:
        regions = children
        return list(regions)

    def plain_op(self, children: list[Any]) -> Operation:
        name, uses, entries, types, arrow = children
        info = self._op_class(str(name), name)
        form = info.form
        types = types or []
        if form is None:
            raise self._error(f"'{name}' has no custom syntax this parser reads; write it in the generic form", name)
        n_uses = 0 if uses is None else uses.value.count(",") + 1
        if form == FUNCTIONAL:
            if arrow is not None or len(types) != 1 or not isinstance(types[0], FunctionType):
                raise self._error(f"'{name}' expects a function type (operand types) -> result type after ':'", name)
            operand_types, result_types = types[0].inputs.data, types[0].outputs.data
        elif form == ARROW:
            if arrow is None:
                raise self._error(f"'{name}' expects 'operand types -> result types' after ':'", name)
            operand_types, result_types = types, arrow
        elif arrow is not None:
            raise self._error(f"unexpected '->' in '{name}'", name)
        elif form == RESULT_TYPES:
            if n_uses:
                raise self._error(f"'{name}' takes no operands", uses)
            operand_types, result_types = (), types
        else:
            operand_types, result_types = types, ()
        props, attrs = self._split(info, entries)
        return self._create(
            name,
            info.cls,
            operands=self._resolve(uses, operand_types, name),
            result_types=result_types,
            properties=props,
            attributes=attrs,
        )

    def module_op(self, children: list[Any]) -> Operation:
        kw, sym, attrs, region = children
        if not region.blocks:
            region.add_block(Block())
        props = {"sym_name": self._symbol(sym).root_reference} if sym is not None else {}
        return self._create(kw, ModuleOp, properties=props, attributes=attrs or {}, regions=[region])

    def func_keyword(self, children: list[Any]) -> Token:
        (tok,) = children
        return tok

    def named_arg(self, children: list[Any]):
        name, type, attrs, loc = children
        return (name, type, attrs or {}, loc)

    def type_arg(self, children: list[Any]) -> Attribute:
        (type,) = children
        return type

    def func_args(self, children: list[Any]) -> list[Any]:
        args = children
        named = [a for a in args if isinstance(a, tuple)]
        if named and len(named) != len(args):
            raise self._error("expected all arguments to be named or all to be unnamed", named[0][0])
        if named:
            block = Block()
            for i, (_, type, _, loc) in enumerate(named):
                block.insert_arg(type, i, self._loc(loc) if loc is not None else None)
            self.pending_entry = (block, [a[0] for a in named])
        return list(args)

    def single_result(self, children: list[Any]) -> tuple[list[Attribute], None]:
        (type,) = children
        return [type], None

    def result_list(self, children: list[Any]):
        results = children
        results = tuple(r for r in results if r is not None)
        types = [t for t, _ in results]
        if any(a for _, a in results):
            return types, ArrayAttr(DictionaryAttr(a or {}) for _, a in results)
        return types, None

    def func_result(self, children: list[Any]):
        type, attrs = children
        return type, attrs

    def func_op(self, children: list[Any]) -> Operation:
        kw, visibility, sym, args, results, attrs, region = children
        self.pending_entry = None  # a declaration leaves its arguments unused
        args = args or []
        named = [a for a in args if isinstance(a, tuple)]
        inputs = [a[1] for a in named] if named else args
        outputs, res_attrs = results if results is not None else ([], None)
        attrs = dict(attrs or {})
        name = self._symbol(sym).root_reference
        ftype = FunctionType.from_lists(inputs, outputs)
        info = self._op_class(str(kw), kw)
        reserved = {"sym_name", "function_type"} | ({"sym_visibility"} if kw.type == "FUNC" else set())
        if clash := reserved & attrs.keys():
            raise self._error(f"attribute {', '.join(sorted(clash))} is given by the syntax, not the dictionary", kw)
        body = region if region is not None else Region()
        if kw.type == "JOB_FUNC":  # the op defines what its custom form stands for
            return self._build(kw, info.cls.name, lambda: info.cls.from_syntax(name, ftype, body, attrs))  # type: ignore[attr-defined]
        props = {"sym_name": name, "function_type": ftype}
        if visibility is not None:
            props["sym_visibility"] = StringAttr(str(visibility))
        if named and any(a[2] for a in named):
            props["arg_attrs"] = ArrayAttr(DictionaryAttr(a[2]) for a in named)
        if res_attrs is not None:
            props["res_attrs"] = res_attrs
        return self._create(
            kw, info.cls, properties=props, attributes=attrs, regions=[body]
        )

    def program_op(self, children: list[Any]) -> Operation:
        kw, sym, device, attrs, region = children
        info = self._op_class(str(kw), kw)
        props = {"sym_name": self._symbol(sym).root_reference, "device": self._string(device)}
        return self._create(kw, info.cls, properties=props, attributes=attrs or {}, regions=[region])

    def kernel_ins(self, children: list[Any]) -> tuple[Token, list[Attribute]]:
        uses, types = children
        return uses, types

    def kernel_op(self, children: list[Any]) -> Operation:
        kw, kernel, ins, out_uses, out_types, params, attrs = children
        info = self._op_class(str(kw), kw)
        in_uses, in_types = ins if ins is not None else (None, [])
        inputs = self._resolve(in_uses, in_types, kw)
        outputs = self._resolve(out_uses, out_types or [], kw)
        props = {"kernel": self._string(kernel)}
        if params is not None:
            props["params"] = DictionaryAttr(params)
        props["operandSegmentSizes"] = DenseArrayBase.from_list(i32, [len(inputs), len(outputs)])
        return self._create(kw, info.cls, operands=[*inputs, *outputs], properties=props, attributes=attrs or {})

    def call_op(self, children: list[Any]) -> Operation:
        kw, sym, uses, entries, ftype = children
        info = self._op_class(str(kw), kw)
        props, attrs = self._split(info, entries)
        return self._create(
            kw,
            info.cls,
            operands=self._resolve(uses, ftype.inputs.data, kw),
            result_types=ftype.outputs.data,
            properties={"callee": self._symbol(sym), **props},
            attributes=attrs,
        )

    def uses(self, children: list[Any]) -> Token:
        (tok,) = children
        return tok

    # -- regions and blocks

    def region_open(self, children: list[Any]) -> None:
        pending, self.pending_entry = self.pending_entry, None
        scope: dict[str, SSAValue] = {}
        self.scopes.append(scope)
        if pending is not None:
            block, names = pending
            for tok, arg in zip(names, block.args):
                self._define(tok[1:], arg, tok)
            self.region_stack.append(_Region([block], keep_entry=True))
        else:
            block = Block()
            self.region_stack.append(_Region([block], keep_entry=False))
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

    # -- attributes

    def attr_dict(self, children: list[Any]) -> dict[str, Attribute]:
        entries = children
        d: dict[str, Attribute] = {}
        for entry in entries:
            if entry is None:
                continue
            key, value, tok = entry
            if key in d:
                raise self._error(f"duplicate key '{key}' in dictionary", tok)
            d[key] = value
        return d

    def entry(self, children: list[Any]) -> tuple[str, Attribute, Token]:
        key, value = children
        return key[0], value, key[1]

    def unit_entry(self, children: list[Any]) -> tuple[str, Attribute, Token]:
        (key,) = children
        return key[0], UnitAttr(), key[1]

    def attr_key(self, children: list[Any]) -> tuple[str, Token]:
        (tok,) = children
        return (unescape(tok) if tok.type == "STRING" else str(tok)), tok

    def int_attr(self, children: list[Any]) -> Attribute:
        tok, type = children
        key = (tok.value, type)
        attr = self.attr_cache.get(key)
        if attr is None:
            text = tok.value
            hexa = "0x" in text or "0X" in text
            value = int(text, 16) if hexa else int(text)
            try:
                if type is None:
                    attr = IntegerAttr(value, i64)
                elif isinstance(type, IntegerType | IndexType):
                    attr = IntegerAttr(value, type)
                elif isinstance(type, AnyFloat):
                    if hexa:
                        raw = value.to_bytes(type.compile_time_size, "little")
                        attr = FloatAttr(next(type.iter_unpack(raw)), type)
                    else:
                        attr = FloatAttr(float(value), type)
                else:
                    raise self._error(f"an integer cannot have type {type}", tok)
            except (VerifyException, OverflowError, ValueError, NotImplementedError) as e:
                raise self._error(str(e), tok) from None
            self.attr_cache[key] = attr
        return attr

    def float_attr(self, children: list[Any]) -> Attribute:
        tok, type = children
        key = (tok.value, type)
        attr = self.attr_cache.get(key)
        if attr is None:
            if not isinstance(type, AnyFloat | None):
                raise self._error(f"a float cannot have type {type}", tok)
            try:
                attr = FloatAttr(float(tok), type or f64)
            except (OverflowError, VerifyException) as e:
                raise self._error(f"{tok} does not fit {type}: {e}", tok) from None
            self.attr_cache[key] = attr
        return attr

    def bool_attr(self, children: list[Any]) -> Attribute:
        (tok,) = children
        return IntegerAttr(1 if tok == "true" else 0, i1)

    def _string(self, tok: Token) -> StringAttr:
        attr = self.attr_cache.get(tok.value)
        if attr is None:
            try:
                attr = self.attr_cache[tok.value] = StringAttr(unescape(tok.value))
            except UnicodeDecodeError:
                raise self._error("string is not valid UTF-8", tok) from None
        return attr  # type: ignore[return-value]

    def array_attr(self, children: list[Any]) -> Attribute:
        items = children
        return ArrayAttr(tuple(i for i in items if i is not None))

    def dict_attr(self, children: list[Any]) -> Attribute:
        (d,) = children
        return DictionaryAttr(d)

    def dense_attr(self, children: list[Any]) -> Attribute:
        tok, type = children
        key = (tok.value, type)
        attr = self.attr_cache.get(key)
        if attr is None:
            try:
                attr = self._dense(tok.value[6:-1], type, tok)
            except _Unsupported:
                attr = self._xdsl_attribute(tok, "dense attribute", lambda p: p.parse_attribute(), f"{tok} : {type}")
            self.attr_cache[key] = attr
        return attr

    def _dense(self, body: str, type: Attribute, tok: Token) -> Attribute:
        if not isinstance(type, TensorType | MemRefType | VectorType):
            raise self._error("a dense attribute needs a tensor, memref or vector type", tok)
        elem = type.element_type
        if not isinstance(elem, IntegerType | IndexType | AnyFloat):
            raise _Unsupported
        shape = list(type.get_shape())
        if any(d < 0 for d in shape):
            raise self._error("a dense attribute needs a static shape", tok)
        count = 1
        for d in shape:
            count *= d
        if body.strip() == "":
            if count:
                raise self._error("expected at least one element in the dense literal", tok)
            return DenseIntOrFPElementsAttr.from_list(type, [])  # type: ignore[arg-type]
        # tokenize: nested lists of numbers and booleans
        pos, stack, values = 0, [[]], []
        top_shape: list[int] | None = None
        literal: Any = None
        while pos < len(body):
            m = _DENSE_TOKEN.match(body, pos)
            if m is None:
                if body[pos:].strip():
                    raise _Unsupported  # complex numbers, hex strings
                break
            pos = m.end()
            if m.group(1):
                stack.append([])
            elif m.group(2):
                if len(stack) < 2:
                    raise self._error("unbalanced ']' in dense literal", tok)
                done = stack.pop()
                stack[-1].append(done)
            elif m.group(4):
                stack[-1].append(m.group(4) == "true")
            elif m.group(5):
                text = m.group(5)
                stack[-1].append(float(text) if "." in text else _Bits(text, 16) if "0x" in text else int(text))
        if len(stack) != 1 or len(stack[0]) != 1:
            raise self._error("malformed dense literal", tok)
        literal = stack[0][0]

        def flatten(x: Any) -> list[int]:
            if not isinstance(x, list):
                values.append(x)
                return []
            if not x:
                return [0]
            subs = [flatten(e) for e in x]
            if any(s != subs[0] for s in subs):
                raise self._error("tensor literal has inconsistent ranks between elements", tok)
            return [len(x), *subs[0]]

        top_shape = flatten(literal)
        if isinstance(literal, list):
            if top_shape != shape:
                raise self._error(f"shape mismatch in dense literal: type has {shape}, literal has {top_shape}", tok)
        elif count > _MAX_SPLAT:
            raise self._error(f"a dense splat of {count} elements is too large to build", tok)
        else:
            values = values * count
        if isinstance(elem, AnyFloat):
            try:
                data = [_float(v, elem) for v in values]
            except OverflowError as e:
                raise self._error(f"invalid dense literal: {e}", tok) from None
        else:
            if any(isinstance(v, float) for v in values):
                raise self._error("expected integer values in the dense literal", tok)
            if isinstance(elem, IntegerType) and elem.width.data != 1 and any(isinstance(v, bool) for v in values):
                raise self._error("booleans are only allowed for i1 elements", tok)
            if (
                isinstance(elem, IntegerType)
                and elem.signedness.data == Signedness.UNSIGNED
                and any(v < 0 for v in values)
            ):
                raise self._error("expected non-negative integer values", tok)
            data = [int(v) for v in values]
        try:
            return DenseIntOrFPElementsAttr.from_list(type, data)  # type: ignore[arg-type]
        except (VerifyException, ValueError, OverflowError, NotImplementedError) as e:
            raise self._error(f"invalid dense literal: {e}", tok) from None

    def dense_array_attr(self, children: list[Any]) -> Attribute:
        (tok,) = children
        attr = self.attr_cache.get(tok.value)
        if attr is None:
            self._check_int_widths(tok)
            body = tok.value[6:-1]
            elem_text, _, values_text = body.partition(":")
            elem = self._scalar_type(elem_text.strip())
            if not isinstance(elem, IntegerType | AnyFloat):
                raise self._error("dense array elements must be integers or floats", tok)
            items = [v.strip() for v in values_text.split(",")] if values_text.strip() else []
            try:
                if isinstance(elem, IntegerType):
                    values = [1 if v == "true" else 0 if v == "false" else int(v, 0 if "x" in v else 10) for v in items]
                    for v in values:
                        elem.verify_value(v)
                    attr = DenseArrayBase.from_list(elem, values)
                else:
                    attr = DenseArrayBase.from_list(elem, [_float(_Bits(v, 16) if "0x" in v else v, elem) for v in items])
            except (ValueError, VerifyException, OverflowError, NotImplementedError) as e:
                raise self._error(f"invalid dense array '{tok}': {e}", tok) from None
            self.attr_cache[tok.value] = attr
        return attr

    def _symbol(self, tok: Token) -> SymbolRefAttr:
        attr = self.attr_cache.get(tok.value)
        if attr is None:
            parts = [p[1:-1] if p.startswith('"') else p for p in _SYMBOL_PART.findall(tok.value)]
            parts = [unescape(f'"{p}"') for p in parts]
            attr = self.attr_cache[tok.value] = SymbolRefAttr(parts[0], parts[1:])
        return attr  # type: ignore[return-value]

    def unit_attr(self, children: list[Any]) -> Attribute:
        return UnitAttr()

    def type_attr(self, children: list[Any]) -> Attribute:
        (type,) = children
        return type

    def builtin_attr(self, children: list[Any]) -> Attribute:
        """A builtin attribute the grammar does not model (`affine_map<...>`, `strided<...>`): xDSL reads it."""
        tok, type = children
        key = (tok.value, type)
        attr = self.attr_cache.get(key)
        if attr is None:
            text = tok.value if type is None else f"{tok.value} : {type}"
            attr = self.attr_cache[key] = self._xdsl_attribute(tok, "attribute", lambda p: p.parse_attribute(), text)
        return attr

    def dialect_attr(self, children: list[Any]) -> Attribute:
        (tok,) = children
        attr = self.attr_cache.get(tok.value)
        if attr is None:
            attr = self.attr_cache[tok.value] = self._xdsl_attribute(tok, "attribute", lambda p: p.parse_attribute())
        return attr

    def _int(self, value: int) -> IntAttr:
        attr = self.int_cache.get(value)
        if attr is None:
            attr = self.int_cache[value] = IntAttr(value)
        return attr

    def _string_of(self, literal: str) -> StringAttr:
        attr = self.attr_cache.get(literal)
        if attr is None:
            attr = self.attr_cache[literal] = StringAttr(unescape(literal))
        return attr  # type: ignore[return-value]

    def _loc(self, tok: Token) -> Attribute:
        loc = self.loc_cache.get(tok.value)
        if loc is None:
            text = tok.value
            if text == "loc(unknown)":
                loc = UnknownLoc()
            elif m := _LOC_FILE.fullmatch(text):
                loc = FileLineColLoc(self._string_of(m[1]), self._int(int(m[2])), self._int(int(m[3])))
            else:
                loc = self._xdsl_attribute(tok, "location", lambda p: p.parse_optional_location())
            self.loc_cache[text] = loc
        return loc

    # -- types

    def types(self, children: list[Any]) -> list[Attribute]:
        types = children
        return list(types)

    def _scalar_type(self, text: str) -> Attribute | None:
        if (t := _FLOATS.get(text)) is not None:
            return t
        if text == "index":
            return IndexType()
        if text == "none":
            return NoneType()
        if m := _INT_TYPE.fullmatch(text):
            return IntegerType(int(m[2]), _SIGNEDNESS[m[1]])
        return None

    def _check_int_widths(self, tok: Token) -> None:
        for m in _WIDE_INT.finditer(tok.value):
            if int(m[1]) > _MAX_INT_WIDTH:
                raise self._error(f"integer types are limited to {_MAX_INT_WIDTH} bits, got i{m[1]}", tok)

    def _simple_type(self, tok: Token) -> Attribute:
        text = tok.value
        t = self.type_cache.get(text)
        if t is None:
            self._check_int_widths(tok)
            if tok.type == "BUILTIN_TYPE":
                t = self._scalar_type(text)
            elif tok.type == "SHAPED_TYPE" and (m := _SHAPED_FAST.fullmatch(text)):
                dims = [int(d) for d in m[2].split("x")[:-1]]
                elem = self._scalar_type(m[3])
                t = TensorType(elem, dims) if m[1] == "tensor" else MemRefType(elem, dims)
            if t is None:
                t = self._xdsl_attribute(tok, "type", lambda p: p.parse_optional_type())
            self.type_cache[text] = t
        return t

    def _function_type(self, inputs: list[Attribute] | None, outputs: list[Attribute]) -> FunctionType:
        key = (tuple(inputs or ()), tuple(outputs))
        ft = self.ftype_cache.get(key)
        if ft is None:
            ft = self.ftype_cache[key] = FunctionType.from_lists(*key)
        return ft

    def function_type_token(self, children: list[Any]) -> FunctionType:
        (tok,) = children
        ft = self.attr_cache.get(tok.value)
        if ft is None:
            inputs: list[Attribute] = []
            outputs: list[Attribute] = []
            into, pos, text = inputs, 1, tok.value
            while m := self.function_type_part.match(text, pos):
                kind = m.lastgroup
                if kind == "arrow":
                    into = outputs
                elif kind is not None:
                    col = (tok.column or 1) + m.start(kind)
                    into.append(self._simple_type(Token(kind, m[kind], tok.start_pos, tok.line, col)))
                pos = m.end()
            ft = self.attr_cache[tok.value] = self._function_type(inputs, outputs)
        return ft  # type: ignore[return-value]

    def one_result(self, children: list[Any]) -> list[Attribute]:
        (type,) = children
        return [type]

    def result_types(self, children: list[Any]) -> list[Attribute]:
        (types,) = children
        return types or []

    # grammar callbacks whose work the builder also needs directly
    def loc_attr(self, children: list[Any]) -> Attribute:
        (tok,) = children
        return self._loc(tok)

    def string_attr(self, children: list[Any]) -> StringAttr:
        (tok,) = children
        return self._string(tok)

    def symbol_attr(self, children: list[Any]) -> SymbolRefAttr:
        (tok,) = children
        return self._symbol(tok)

    def simple_type(self, children: list[Any]) -> Attribute:
        (tok,) = children
        return self._simple_type(tok)

    def function_type(self, children: list[Any]) -> FunctionType:
        inputs, outputs = children
        return self._function_type(inputs, outputs)


# ----------------------------------------------------------------- driver


class _LarkParser:
    """One lark LALR parser with its embedded builder (one per thread: the builder holds parse state)."""

    def __init__(self) -> None:
        self.builder = _Builder()
        self.lark = Lark(
            GRAMMAR.read_text(),
            parser="lalr",
            lexer=TextIRLexer,
            transformer=self.builder,
            maybe_placeholders=True,
            propagate_positions=False,
            cache=True,
        )
        self.human = {t.name: self._describe(t) for t in self.lark.terminals}
        terminals = {t.name: t.pattern.to_regexp() for t in self.lark.terminals}
        types = "|".join(f"(?P<{k}>{terminals[k]})" for k in ("SHAPED_TYPE", "DIALECT_TYPE", "BUILTIN_TYPE"))
        self.builder.function_type_part = re.compile(rf"\s*(?:(?P<arrow>\)\s*->\s*\(?)|[,()]|{types})")

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
        if _OP_START & names:
            words.append("an operation")
            names -= _OP_START | {"RESULTS", "STRING"}
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
                got = f"'{_clip(tok.value)}'"
                where = (tok.line or 1, tok.column or 1)
            return b._error(f"expected {self.expected(e.expected)}, got {got}", where)
        if isinstance(e, UnexpectedCharacters):
            got = b.text[e.pos_in_stream : e.pos_in_stream + 1]
            return b._error(f"unexpected character '{got}', expected {self.expected(e.allowed)}", (e.line, e.column))
        if isinstance(e, UnexpectedEOF):
            return b._error(
                f"unexpected end of input, expected {self.expected(set(e.expected))}", _end_position(b.text)
            )
        return b._error(str(e), (getattr(e, "line", 1), getattr(e, "column", 1)))

    def parse(self, text: str, filename: str, ctx: Context, verify: bool, implicit_module: bool) -> ModuleOp:
        b = self.builder
        b._reset(ctx, text, filename)
        # The parse allocates millions of objects and frees none; generational
        # collections over the growing heap would make it superlinear.
        collecting = gc.isenabled()
        gc.disable()
        try:
            self.lark.parse(text)
        except UnexpectedInput as e:
            raise self.convert(e) from None
        except IRParseError:
            raise
        except TokenError as e:
            line = text.count("\n", 0, e.offset) + 1
            raise b._error(e.message, (line, e.offset - text.rfind("\n", 0, e.offset))) from None
        except Exception as e:  # noqa: BLE001
            # xDSL refusing a construct the grammar accepts (say, an i640 array): still a parse error
            where = self.lark.parser.lexer.last
            raise b._error(f"invalid IR: {type(e).__name__}: {e}", where) from None
        finally:
            if collecting:
                gc.enable()
        top = b.region_stack[0].blocks[0]
        first = top.first_op
        if first is not None and first is top.last_op and isinstance(first, ModuleOp):
            top.detach_op(first)
            module = first
        elif implicit_module:
            module = ModuleOp(Region(top))
        else:
            raise b._error("expected a single builtin.module at the top level", b.positions.get(first))  # type: ignore[arg-type]
        if verify and (failure := first_verify_failure(module)) is not None:
            op, e = failure
            raise b._error(f"'{op.name}' op {e}", b.positions.get(op))
        return module


_VALUE_IN_LIST = re.compile(r"%[\w$.\-]+")


def _nth_value(tok: Token, index: int) -> tuple[tuple[int, int]]:
    """Line and column of the `index`-th `%name` inside a list token such as `%a, %b =`."""
    start = [m.start() for m in _VALUE_IN_LIST.finditer(tok.value)][index]
    before = tok.value[:start]
    lines = before.count("\n")
    col = start - before.rfind("\n") if lines else (tok.column or 1) + start
    return (((tok.line or 1) + lines, col),)


def _clip(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _end_position(text: str) -> tuple[int, int]:
    lines = text.splitlines() or [""]
    return len(lines), len(lines[-1]) + 1


_local = threading.local()


def _parser() -> _LarkParser:
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = _LarkParser()
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
    return _parser().parse(text, filename, ctx or default_context(), verify, implicit_module)
