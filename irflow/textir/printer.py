"""Module -> text: xDSL's Printer, made fast, with every dictionary printed in key order.

`print_module` prints exactly the bytes xDSL's `Printer` prints (with sorted
dictionaries), custom or generic form, with or without locations.
`FastPrinter` keeps xDSL's code for everything it does not speed up, so any
op or attribute prints as xDSL prints it; what it replaces is what made
xDSL's printer slow:

- one `print()` call per piece of text (a string literal went character by
  character): text is written to the stream directly;
- every type, attribute and location printed afresh: each distinct attribute
  is printed once (by xDSL's code) and its text reused, found by identity
  first (a module shares its attribute objects) and then by equality;
- the generic form and the declarative assembly formats (`assembly_format`,
  which every job and buffer op uses) interpreted directive by directive
  through context managers and per-op dictionary merges: both are printed by
  plans made once per op class (`_OpPlan`), with xDSL's spacing rules.  A
  directive kind the plan does not model is printed by xDSL's own directive.

Columns are not tracked (they only place diagnostic messages, which
`print_module` never prints).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from io import StringIO

from xdsl.dialects.builtin import FileLineColLoc, FunctionType, UnitAttr, UnregisteredOp
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import (
    AttrDictDirective,
    FormatDirective,
    FormatProgram,
    FunctionalTypeDirective,
    OperandsDirective,
    OptionalGroupDirective,
    PrintingState,
    TypeDirective,
    VariadicOperandVariable,
)
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove
from xdsl.utils.mlir_lexer import MLIRLexer


class SortedPrinter(Printer):
    """xDSL's Printer with every dictionary printed in key order, as MLIR's sorted DictionaryAttr.

    The order an op's properties and attributes were set in (by a pass, a
    frontend or a parse) then never shows in the text, so diffs stay clean.
    """

    def print_attr_dict(self, attr_dict: Mapping[str, Attribute]) -> None:
        super().print_attr_dict(dict(sorted(attr_dict.items())))


# ----------------------------------------------------------------- literals

_PLAIN_LITERAL = re.compile(r'[ !#-\[\]-~]*')  # printable ASCII except `"` and `\`


def _bytes_literal(data: bytes) -> str:
    """MLIR's string literal for `data`, as `Printer.print_bytes_literal` writes it."""
    out = ['"']
    for byte in data:
        if byte == 0x5C:
            out.append("\\\\")
        elif byte < 0x20 or byte > 0x7E or byte == 0x22:
            out.append(f"\\{byte:02X}")
        else:
            out.append(chr(byte))
    out.append('"')
    return "".join(out)


def _string_literal(text: str) -> str:
    return f'"{text}"' if _PLAIN_LITERAL.fullmatch(text) else _bytes_literal(text.encode("utf-8"))


@functools.lru_cache(maxsize=4096)
def _key(name: str) -> str:
    """An attribute dictionary key as xDSL prints it: bare when it is an identifier."""
    return name if MLIRLexer.bare_identifier_regex.fullmatch(name) is not None else _string_literal(name)


# ----------------------------------------------------------------- the printer


@dataclass(eq=False, repr=False)
class FastPrinter(SortedPrinter):
    """`SortedPrinter` with the same output at a fraction of the cost (see the module docstring)."""

    def __post_init__(self) -> None:
        assert self.stream is not None
        self._write: Callable[[str], object] = self.stream.write
        self._by_id: dict[int, tuple[Attribute, str]] = {}
        self._by_value: dict[Attribute, str] = {}

    # -- text

    def print_string(self, text: str, *, indent: int | None = None) -> None:
        if "\n" in text or self._next_line_callback:
            super().print_string(text, indent=indent)
        else:
            self._write(text)

    def _print_new_line(self, indent: int | None = None, print_message: bool = True) -> None:
        if self._next_line_callback:
            super()._print_new_line(indent, print_message)
            return
        self._current_line += 1
        self._write("\n" + " " * ((self._indent if indent is None else indent) * self.indent_num_spaces))

    def print_string_literal(self, string: str) -> None:
        self._write(_string_literal(string))

    def print_bytes_literal(self, bytestring: bytes) -> None:
        self._write(_bytes_literal(bytestring))

    def print_identifier_or_string_literal(self, string: str) -> None:
        self._write(_key(string))

    # -- attributes

    def print_attribute(self, attribute: Attribute) -> None:
        self._write(self.attribute_text(attribute))

    def attribute_text(self, attribute: Attribute) -> str:
        """What xDSL prints for `attribute`, computed once per distinct attribute."""
        if self.printing_location:  # inside loc(...): a nested location prints without `loc`
            return self._render(attribute)
        hit = self._by_id.get(id(attribute))
        if hit is not None:
            return hit[1]
        if type(attribute) is FileLineColLoc:  # one per op, rarely equal: skip the equality cache
            text = f"loc({_string_literal(attribute.filename.data)}:{attribute.line.data:d}:{attribute.column.data:d})"
            self._by_id[id(attribute)] = (attribute, text)
            return text
        try:
            text = self._by_value.get(attribute)
        except TypeError:  # an attribute with an unhashable parameter
            return self._render(attribute)
        if text is None:
            text = self._render(attribute)
            if "\n" in text:  # its text would depend on the indentation
                return text
            self._by_value[attribute] = text
        self._by_id[id(attribute)] = (attribute, text)  # the entry keeps the object, so its id stays unique
        return text

    def _render(self, attribute: Attribute) -> str:
        stream, write = self.stream, self._write
        self.stream = StringIO()
        self._write = self.stream.write
        try:
            super().print_attribute(attribute)
            return self.stream.getvalue()
        finally:
            self.stream, self._write = stream, write

    def dict_text(self, entries: Mapping[str, Attribute] | Sequence[tuple[str, Attribute]]) -> str:
        """`{a = 1, b}`: the entries in key order, unit entries as bare keys."""
        items = sorted(entries.items() if isinstance(entries, Mapping) else entries)
        text = self.attribute_text
        return (
            "{"
            + ", ".join(_key(k) if isinstance(v, UnitAttr) else f"{_key(k)} = {text(v)}" for k, v in items)
            + "}"
        )

    def print_attr_dict(self, attr_dict: Mapping[str, Attribute]) -> None:
        self._write(self.dict_text(attr_dict))

    def types_text(self, types: Sequence[Attribute]) -> str:
        text = self.attribute_text
        return ", ".join([text(t) for t in types])

    # -- values

    def value_name(self, value: SSAValue) -> str:
        """The name `value` prints as (without `%`), given on first use as `print_ssa_value` gives it."""
        name = self._ssa_values.get(value)
        if name is None:
            hint = value.name_hint
            if hint:
                names = self._ssa_names[-1]
                count = names.get(hint, 0)
                name = f"{hint}_{count}" if count else hint
                names[hint] = count + 1
            else:
                name = self._get_new_valid_name_id()
            self._ssa_values[value] = name
        return name

    def print_ssa_value(self, value: SSAValue) -> str:
        name = self.value_name(value)
        self._write("%" + name)
        return name

    def values_text(self, values: Sequence[SSAValue]) -> str:
        name = self.value_name
        return ", ".join(["%" + name(v) for v in values])

    # -- ops

    def print_op(self, op: Operation) -> None:
        plan = _plan(type(op))
        if plan is None or op in self.diagnostic.op_messages:
            super().print_op(op)
            return
        write = self._write
        if op.results:
            write(self.values_text(op.results) + " = ")
        if plan.isolated:
            self.enter_scope()
        if self.print_generic_format or plan.steps is None:
            write(plan.quoted)
            self.print_op_with_default_format(op)
        else:
            write(op.name)
            steps = plan.steps
            if steps:
                state = PrintingState()
                for step in steps:
                    step(self, state, op)
            else:
                op.print(self)
            if self.print_debuginfo:
                write(" " + self.attribute_text(op.location))
        if plan.isolated:
            self.exit_scope()

    def print_op_with_default_format(self, op: Operation) -> None:
        if self.print_properties_as_attributes:
            super().print_op_with_default_format(op)
            return
        write = self._write
        write("(" + self.values_text(op.operands) + ")")
        if op.successors:
            write(" [" + ", ".join(["^" + self._get_block_name(b) for b in op.successors]) + "]")
        if op.properties:
            write(" <" + self.dict_text(op.properties) + ">")
        if op.regions:
            write(" (")
            for i, region in enumerate(op.regions):
                if i:
                    write(", ")
                self.print_region(region)
            write(")")
        if op.attributes:
            write(" " + self.dict_text(op.attributes))
        write(" : (" + self.types_text(op.operand_types) + ") -> " + self._results_text(op.result_types))
        if self.print_debuginfo:
            write(" " + self.attribute_text(op.location))

    def _results_text(self, types: Sequence[Attribute]) -> str:
        if len(types) == 1:
            only = self.attribute_text(types[0])
            return f"({only})" if isinstance(types[0], FunctionType) else only
        return "(" + self.types_text(types) + ")"

    def print_block_name(self, block: Block) -> str:
        name = self._get_block_name(block)
        self._write("^" + name)
        return name


def print_module(op: Operation, *, generic: bool = False, debuginfo: bool = False) -> str:
    """The text `parse_module` reads back to an equal module, with a trailing newline."""
    stream = StringIO()
    FastPrinter(stream=stream, print_generic_format=generic, print_debuginfo=debuginfo).print_op(op)
    stream.write("\n")
    return stream.getvalue()


# ----------------------------------------------------------------- per-class plans

_Step = Callable[[FastPrinter, PrintingState, Operation], None]


@dataclass(frozen=True)
class _OpPlan:
    """How `FastPrinter` prints one op class."""

    quoted: str  # `"name"`, for the generic form
    isolated: bool  # IsolatedFromAbove: names restart their numbering inside, as in xDSL
    steps: tuple[_Step, ...] | None  # None: no custom form; (): the op's own `print`


_PLANS: dict[type[Operation], _OpPlan | None] = {}


def _plan(cls: type[Operation]) -> _OpPlan | None:
    try:
        return _PLANS[cls]
    except KeyError:
        pass
    plan = None
    if issubclass(cls, IRDLOperation) and not issubclass(cls, UnregisteredOp):
        op_def = cls.get_irdl_definition()
        if Operation.print is cls.print:
            steps: tuple[_Step, ...] | None = None
        elif op_def.assembly_format is not None and cls.print.__name__ == "print_with_format":
            program = FormatProgram.from_str(op_def.assembly_format, op_def)
            steps = tuple(_step(d, cls) for d in program.stmts)
        else:
            steps = ()
        isolated = bool(cls.get_traits_of_type(IsolatedFromAbove))
        plan = _OpPlan(f'"{cls.name}"', isolated, steps)
    _PLANS[cls] = plan
    return plan


def _space(state: PrintingState, write: Callable[[str], object]) -> None:
    """`PrintingState.print_whitespace`."""
    if state.should_emit_space or not state.last_was_punctuation:
        write(" ")
    state.should_emit_space = True
    state.last_was_punctuation = False


def _step(d: FormatDirective, cls: type[IRDLOperation]) -> _Step:
    """One directive of a declarative format as a function; each mirrors the directive's `print`."""
    kind = type(d)
    if kind is AttrDictDirective:
        return _attr_dict_step(d, cls)  # type: ignore[arg-type]
    if kind is OperandsDirective:

        def operands(p: FastPrinter, state: PrintingState, op: Operation) -> None:
            if op.operands:
                _space(state, p._write)
                p._write(p.values_text(op.operands))

        return operands
    if kind is VariadicOperandVariable:
        name = d.name  # type: ignore[attr-defined]

        def variadic(p: FastPrinter, state: PrintingState, op: Operation) -> None:
            if values := getattr(op, name):
                _space(state, p._write)
                p._write(p.values_text(values))

        return variadic
    if kind is TypeDirective:
        get_types = d.inner.get_types  # type: ignore[attr-defined]

        def types(p: FastPrinter, state: PrintingState, op: Operation) -> None:
            if ts := get_types(op):
                _space(state, p._write)
                p._write(p.types_text(ts))

        return types
    if kind is FunctionalTypeDirective:
        inputs = d.operand_typeable_directive.get_types  # type: ignore[attr-defined]
        outputs = d.result_typeable_directive.get_types  # type: ignore[attr-defined]

        def functional(p: FastPrinter, state: PrintingState, op: Operation) -> None:
            _space(state, p._write)
            results = outputs(op)
            tail = p.attribute_text(results[0]) if len(results) == 1 else "(" + p.types_text(results) + ")"
            p._write("(" + p.types_text(inputs(op)) + ") -> " + tail)

        return functional
    if kind is OptionalGroupDirective:
        present = d.anchor.is_present  # type: ignore[attr-defined]
        then = tuple(_step(e, cls) for e in (*d.then_whitespace, d.then_first, *d.then_elements))  # type: ignore[attr-defined]
        otherwise = tuple(_step(e, cls) for e in d.else_elements)  # type: ignore[attr-defined]

        def group(p: FastPrinter, state: PrintingState, op: Operation) -> None:
            for step in then if present(op) else otherwise:
                step(p, state, op)

        return group
    # punctuation, keywords, single operands, attributes, regions, ...: xDSL's own directive,
    # printing through the fast printer's methods
    return d.print  # type: ignore[return-value]


def _attr_dict_step(d: AttrDictDirective, cls: type[IRDLOperation]) -> _Step:
    """`AttrDictDirective.print` with its per-op set algebra done once per class."""
    op_def = cls.get_irdl_definition()
    expected = frozenset(d.expected_properties)
    defs = {x: op_def.properties[x] for x in expected} | dict(op_def.attributes)
    defaults = {name: a.default_value for name, a in defs.items() if a.default_value is not None}
    reserved = frozenset(d.reserved_attr_names)
    keyword = " attributes " if d.with_keyword else " "

    def attr_dict(p: FastPrinter, state: PrintingState, op: Operation) -> None:
        attrs = op.attributes
        if expected and not attrs.keys().isdisjoint(expected):
            d.print(p, state, op)  # type: ignore[arg-type]  # xDSL raises its error
            return
        entries = [
            (k, v)
            for k, v in attrs.items() if k not in reserved and (k not in defaults or v != defaults[k])
        ]
        if expected:
            entries += [
                (k, v)
                for k, v in op.properties.items()
                if k in expected and k not in reserved and (k not in defaults or v != defaults[k])
            ]
        if entries:
            p._write(keyword + p.dict_text(entries))
            state.last_was_punctuation = False
            state.should_emit_space = True

    return attr_dict
