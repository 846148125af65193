"""Grammar alternatives made from ops' declarative assembly formats: an op's custom form is its class's.

An op whose IRDL `assembly_format` is not the shared plain form (`buffer.program`,
`buffer.kernel`, `func.call`) gets one alternative of grammar.lark's `format_op`
rule, translated from the format's directives when the parser is built, and a
plan saying what each child of that alternative sets.  `OpBuilder.format_op`
follows the plan, so adding such an op never means editing the grammar.  Formats
using a directive this does not translate (say, an attribute of arbitrary kind
right before the op's end, which LALR(1) could not tell from the next op) keep
the generic form only, as before.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects.builtin import DictionaryAttr, StringAttr, SymbolRefAttr
from xdsl.ir import Operation
from xdsl.irdl import IRDLOperation, OpDef
from xdsl.irdl.declarative_assembly_format import (
    AttrDictDirective,
    AttributeVariable,
    FormatDirective,
    FormatProgram,
    FunctionalTypeDirective,
    KeywordDirective,
    OperandsDirective,
    OperandVariable,
    OptionalGroupDirective,
    PunctuationDirective,
    RegionVariable,
    ResultsDirective,
    ResultVariable,
    SymbolNameAttributeVariable,
    TypeDirective,
    UniqueBaseAttributeVariable,
    VariadicOperandVariable,
    VariadicResultVariable,
    WhitespaceDirective,
)

# What one child of a format alternative sets (the second field names the variable):
SYMBOL_NAME = "symbol-name"  # SYMBOL -> a StringAttr property/attribute
SYMBOL_REF = "symbol-ref"  # SYMBOL -> a SymbolRefAttr
STRING = "string"  # STRING -> a StringAttr
DICT = "dict"  # attr_dict -> a DictionaryAttr
ATTR_DICT = "attr-dict"  # attr_dict -> discardable attributes (and properties MLIR allows there)
USES = "uses"  # VALUES -> an operand variable's values ("" names all operands)
TYPES = "types"  # types -> an operand variable's types
FUNCTIONAL = "functional"  # function_type -> operand types and result types
REGION = "region"  # region -> a region variable


class Untranslatable(Exception):
    """The format uses something the grammar cannot read generically: the op keeps the generic form."""


@dataclass(frozen=True)
class FormatPlan:
    """One op's custom form: its grammar alternative and what each kept child sets, in order."""

    op_name: str
    terminal: str  # the op name's keyword terminal
    alternative: str  # lark symbols after the op name
    slots: tuple[tuple[str, str], ...]
    assembly_format: str  # the class's format the plan was made from
    reserved: frozenset[str]  # names the syntax gives, refused in the attribute dictionary
    dict_properties: frozenset[str]  # properties MLIR lets the attribute dictionary hold


def _lark_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _attribute(d: AttributeVariable, op_def: OpDef) -> tuple[str, str]:
    """The one token kind the attribute's constraint allows: anything wider could not end an op."""
    if isinstance(d, SymbolNameAttributeVariable):
        return "SYMBOL", SYMBOL_NAME
    if isinstance(d, UniqueBaseAttributeVariable):
        base = d.unique_base
    else:
        definition = (op_def.properties if d.is_property else op_def.attributes)[d.name]
        bases = definition.constr.get_bases()
        if bases is None or len(bases) != 1:
            raise Untranslatable(f"attribute ${d.name} of several kinds")
        (base,) = bases
    if base is StringAttr:
        return "STRING", STRING
    if base is SymbolRefAttr:
        return "SYMBOL", SYMBOL_REF
    if base is DictionaryAttr:
        return "attr_dict", DICT
    raise Untranslatable(f"attribute ${d.name} of kind {base.__name__}")


def _operand_name(d: object) -> str:
    if isinstance(d, OperandsDirective):
        return ""
    if isinstance(d, OperandVariable | VariadicOperandVariable):
        return d.name
    raise Untranslatable(type(d).__name__)


def _translate(
    directives: Iterable[FormatDirective], op_def: OpDef, slots: list[tuple[str, str]], state: dict[str, object]
) -> list[str]:
    symbols: list[str] = []
    directives = [d for d in directives if not isinstance(d, WhitespaceDirective)]
    i = 0
    while i < len(directives):
        d = directives[i]
        i += 1
        if (
            isinstance(d, VariadicOperandVariable)
            and directives[i : i + 1] == [PunctuationDirective(":")]
            and directives[i + 1 : i + 2] == [TypeDirective(d)]
        ):  # `$xs : type($xs)` with no values reads `()` as well as `( : )`
            symbols.append('[VALUES ":" types]')
            slots += [(USES, d.name), (TYPES, d.name)]
            i += 2
        elif isinstance(d, KeywordDirective):
            symbols.append(_lark_literal(d.keyword))
        elif isinstance(d, PunctuationDirective):
            symbols.append(_lark_literal(d.punctuation))
        elif type(d) in (AttributeVariable, SymbolNameAttributeVariable, UniqueBaseAttributeVariable):
            symbol, kind = _attribute(d, op_def)
            symbols.append(f"[{symbol}]" if d.is_optional and not state.get("in_group") else symbol)
            slots.append((kind, d.name))
        elif isinstance(d, OperandVariable | VariadicOperandVariable | OperandsDirective):
            symbols.append("VALUES" if isinstance(d, OperandVariable) else "[VALUES]")
            slots.append((USES, _operand_name(d)))
        elif isinstance(d, TypeDirective):
            symbols.append("types" if isinstance(d.inner, OperandVariable) else "[types]")
            slots.append((TYPES, _operand_name(d.inner)))
        elif isinstance(d, FunctionalTypeDirective):
            if not isinstance(d.result_typeable_directive, ResultsDirective | ResultVariable | VariadicResultVariable):
                raise Untranslatable("functional-type of operands")
            symbols.append("function_type")
            slots.append((FUNCTIONAL, _operand_name(d.operand_typeable_directive)))
            state["results"] = True
        elif isinstance(d, AttrDictDirective):
            symbols.append('["attributes" attr_dict]' if d.with_keyword else "[attr_dict]")
            slots.append((ATTR_DICT, ""))
            state["reserved"] = frozenset(d.reserved_attr_names)
            state["dict_properties"] = frozenset(d.expected_properties)
        elif isinstance(d, RegionVariable):
            symbols.append("region")
            slots.append((REGION, d.name))
        elif isinstance(d, OptionalGroupDirective) and not d.else_elements:
            state["in_group"] = True
            inner = _translate((d.then_first, *d.then_elements), op_def, slots, state)
            state["in_group"] = False
            symbols.append("[" + " ".join(inner) + "]")
        else:
            raise Untranslatable(type(d).__name__)
    return symbols


@functools.cache
def format_plan(cls: type[Operation]) -> FormatPlan | None:
    """The plan for `cls`'s assembly format, or None if the grammar cannot read it generically."""
    if not issubclass(cls, IRDLOperation):
        return None
    op_def = cls.get_irdl_definition()
    if op_def.assembly_format is None:
        return None
    slots: list[tuple[str, str]] = []
    state: dict[str, object] = {}
    try:
        program = FormatProgram.from_str(op_def.assembly_format, op_def)
        symbols = _translate(program.stmts, op_def, slots, state)
    except Untranslatable:
        return None
    if op_def.results and not state.get("results"):
        return None  # result types inferred by the format: not modelled
    terminal = "FORM_" + re.sub(r"[^A-Za-z0-9_]", "_", cls.name).upper()
    return FormatPlan(
        cls.name,
        terminal,
        " ".join(symbols),
        tuple(slots),
        op_def.assembly_format,
        state.get("reserved", frozenset()),  # type: ignore[arg-type]
        state.get("dict_properties", frozenset()),  # type: ignore[arg-type]
    )


def format_grammar(plans: Iterable[FormatPlan]) -> str:
    """grammar.lark's `format_op` rule and keyword terminals for these plans (sorted: a stable cache key)."""
    plans = sorted(plans, key=lambda p: p.op_name)
    lines = ["format_op: " + "\n         | ".join(f"{p.terminal} {p.alternative}" for p in plans)]
    lines += [f"{p.terminal}: {_lark_literal(p.op_name)}" for p in plans]
    return "\n".join(lines) + "\n"
