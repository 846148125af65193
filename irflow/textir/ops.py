"""Reduce callbacks that build ops: the generic form, the shared plain form, and the custom forms.

The plain form of an op comes from its IRDL `assembly_format`, classified once
per class (`op_info`), so a new op with one of those formats needs no grammar change.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

from lark import Token
from xdsl.dialects.builtin import (
    UNKNOWN_LOC,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FunctionType,
    ModuleOp,
    StringAttr,
    i32,
)
from xdsl.ir import (
    Attribute,
    Block,
    Operation,
    Region,
)
from xdsl.irdl import AttrSizedOperandSegments, IRDLOperation, ParsePropInAttrDict, VarOperandDef
from xdsl.utils.exceptions import VerifyException

from irflow.textir import formats
from irflow.textir.builder import BuilderBase

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


@functools.cache
def op_info(cls: type[Operation]) -> OpInfo:
    """Classified once per class: every parser and context shares the result."""
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



class FunctionLike(Protocol):
    """An op written in func.func's custom form, `d.op @f(%x: t) -> t attributes {...} {...}` (job.func).

    The grammar reads that form for any op name; the op's class says what it
    stands for, and its xDSL `parse` hook calls the same method, so the form is
    defined once, next to the op.
    """

    @classmethod
    def from_syntax(
        cls, name: str | StringAttr, function_type: FunctionType, region: Region, attributes: Mapping[str, Attribute]
    ) -> Operation: ...


class OpBuilder(BuilderBase):
    """Each callback returns its op; `op_with_results` binds the names and appends it to the block."""

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
        info = self._op_class(self._unescape(name, name), name)
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
        self._op_class(self._unescape(tok, tok), tok)
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
        if kw.type != "FUNC":  # another dialect's op in func.func's form: its class says what that stands for
            if not hasattr(info.cls, "from_syntax"):
                raise self._error(
                    f"'{kw}' has no function-like custom form (its class defines no `from_syntax`)", kw
                )
            if visibility is not None:
                raise self._error(f"'{kw}' takes no visibility", visibility)
            if (named and any(a[2] for a in named)) or res_attrs is not None:
                raise self._error(f"'{kw}' takes no argument or result attributes", kw)
            cls = cast("type[FunctionLike]", info.cls)
            return self._build(kw, info.cls.name, lambda: cls.from_syntax(name, ftype, body, attrs))
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

    def format_op(self, children: list[Any]) -> Operation:
        """An op in its class's declarative assembly format, read by the plan made from that format."""
        kw = children[0]
        plan = self.format_plans[kw.type]
        info = self._op_class(plan.op_name, kw)
        if not issubclass(info.cls, IRDLOperation) or info.cls.get_irdl_definition().assembly_format != plan.assembly_format:
            raise self._error(f"'{kw}' has a different custom form in this context; write it in the generic form", kw)
        op_def = info.cls.get_irdl_definition()
        uses: dict[str, Token | None] = {}
        types: dict[str, list[Attribute]] = {}
        props: dict[str, Attribute] = {}
        attrs: dict[str, Attribute] = {}
        regions: dict[str, Region] = {}
        result_types: list[Attribute] = []
        for (kind, var), child in zip(plan.slots, children[1:]):
            if child is None:
                continue
            if kind == formats.USES:
                uses[var] = child
            elif kind == formats.TYPES:
                types[var] = child
            elif kind == formats.FUNCTIONAL:
                types[var], result_types = list(child.inputs.data), list(child.outputs.data)
            elif kind == formats.REGION:
                regions[var] = child
            elif kind == formats.ATTR_DICT:
                if clash := plan.reserved & child.keys():
                    raise self._error(
                        f"attribute {', '.join(sorted(clash))} is given by the syntax, not the dictionary", kw
                    )
                for k, v in child.items():
                    (props if k in plan.dict_properties else attrs)[k] = v
            else:
                value = {
                    formats.SYMBOL_NAME: lambda: self._symbol(child).root_reference,
                    formats.SYMBOL_REF: lambda: self._symbol(child),
                    formats.STRING: lambda: self._string(child),
                    formats.DICT: lambda: DictionaryAttr(child),
                }[kind]()
                (props if var in op_def.properties else attrs)[var] = value
        if "" in uses or "" in types:  # `operands`: all of them at once
            operands = self._resolve(uses.get(""), types.get("", []), uses.get("") or kw)
            sizes = []
        else:
            operands, sizes = [], []
            for name, _ in op_def.operands:
                values = self._resolve(uses.get(name), types.get(name, []), uses.get(name) or kw)
                operands += values
                sizes.append(len(values))
        for name, prop in op_def.properties.items():
            if name not in props and prop.default_value is not None:
                props[name] = prop.default_value
        segments = next((o for o in op_def.options if isinstance(o, AttrSizedOperandSegments)), None)
        if segments is not None:
            sizes_attr = DenseArrayBase.from_list(i32, sizes)
            (props if segments.as_property else attrs)[segments.attribute_name] = sizes_attr
        return self._create(
            kw,
            info.cls,
            operands=operands,
            result_types=result_types,
            properties=props,
            attributes=attrs,
            regions=[regions.get(name, Region()) for name, _ in op_def.regions],
        )

    def uses(self, children: list[Any]) -> Token:
        (tok,) = children
        return tok
