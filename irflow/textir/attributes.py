"""Reduce callbacks for attributes, types and locations, from coarse tokens converted once per parse.

Common cases (`tensor<4xf32>`, `loc("f":1:2)`, integers, dense literals) have
fast paths; anything rarer is handed to xDSL's attribute parser.
"""

from __future__ import annotations

import re
from typing import Any

from lark import Token
from xdsl.dialects.builtin import (
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
    i64,
)
from xdsl.ir import Attribute
from xdsl.utils.exceptions import VerifyException

from irflow.textir.builder import BuilderBase, clip

# ----------------------------------------------------------------- scalar tables

_FLOATS: dict[str, Attribute] = {
    "bf16": BFloat16Type(),
    "f16": Float16Type(),
    "f32": Float32Type(),
    "f64": Float64Type(),
    "f80": Float80Type(),
    "f128": Float128Type(),
}
_INT_TYPE = re.compile(r"([su]?)i([0-9]+)")
_SIGNEDNESS = {"": Signedness.SIGNLESS, "s": Signedness.SIGNED, "u": Signedness.UNSIGNED}
_SHAPED_FAST = re.compile(r"(tensor|memref)<((?:[0-9]+x)*)([su]?i[0-9]+|bf16|f16|f32|f64|index)>")
_LOC_FILE = re.compile(r'loc\(("[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"):([0-9]+):([0-9]+)\)')
_SYMBOL_PART = re.compile(r'@([A-Za-z_][A-Za-z0-9_$.]*|"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+")')
# grammar.lark's INT and FLOAT: Python's int() and float() would also take `1_000`, `+1`, `inf` and other scripts' digits
_NUMBER = r"-?(?:0x[0-9A-Fa-f]+|[0-9]+(?:\.[0-9]*(?:[eE][+\-]?[0-9]+)?)?)"
_DENSE_TOKEN = re.compile(rf"[ \t\n\r\f\v]*(?:(\[)|(\])|(,)|(true|false)|({_NUMBER}))")
_DENSE_ARRAY_ITEM = re.compile(rf"true|false|{_NUMBER}")
_MAX_INT_WIDTH = (1 << 24) - 1  # MLIR's limit; `1 << width` for a wider type exhausts memory
_WIDE_INT = re.compile(r"(?<![A-Za-z0-9_$.])[su]?i([0-9]{8,})(?![A-Za-z0-9_$.])")
_MAX_SPLAT = 1 << 24  # elements a `dense<x> : tensor<...>` splat may expand to


class _Bits(int):
    """A hexadecimal literal: for a float element it is the bit pattern, as in MLIR (`0x7FC00000 : f32`)."""


def _float(value: object, type: AnyFloat) -> float:
    if isinstance(value, _Bits):
        return next(type.iter_unpack(int(value).to_bytes(type.compile_time_size, "little")))
    return float(value)  # type: ignore[arg-type]


class _Unsupported(Exception):
    """A coarse token the fast paths do not handle: ask xDSL's attribute parser."""



def _file_line_col(filename: StringAttr, line: IntAttr, column: IntAttr) -> FileLineColLoc:
    """`FileLineColLoc(filename, line, column)` without IRDL's check that the parameters are a
    StringAttr and two IntAttrs, which the types here guarantee.

    A parse makes one location per op, and the check cost most of its time.
    """
    loc = FileLineColLoc.__new__(FileLineColLoc)
    object.__setattr__(loc, "filename", filename)
    object.__setattr__(loc, "line", line)
    object.__setattr__(loc, "column", column)
    return loc


class AttributeBuilder(BuilderBase):
    """Attributes and types are cached by their token's text for the length of one parse."""

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
        return (self._unescape(tok, tok) if tok.type == "STRING" else str(tok)), tok

    def int_attr(self, children: list[Any]) -> Attribute:
        tok, type = children
        key = (tok.value, type)
        attr = self.attr_cache.get(key)
        if attr is None:
            text = tok.value
            hexa = "0x" in text or "0X" in text
            value = int(text, 16) if hexa else int(text)
            if not isinstance(type, IntegerType | IndexType | AnyFloat | None):
                raise self._error(f"an integer cannot have type {type}", tok)
            self._check_packable(type, tok)
            try:
                if type is None:
                    attr = IntegerAttr(value, i64)
                elif isinstance(type, IntegerType | IndexType):
                    attr = IntegerAttr(value, type)
                elif hexa:
                    raw = value.to_bytes(type.compile_time_size, "little")
                    attr = FloatAttr(next(type.iter_unpack(raw)), type)
                else:
                    attr = FloatAttr(float(value), type)
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
            self._check_packable(type, tok)
            try:
                attr = FloatAttr(float(tok), type or f64)
            except (OverflowError, VerifyException) as e:
                raise self._error(f"{tok} does not fit {type}: {e}", tok) from None
            self.attr_cache[key] = attr
        return attr

    def _check_packable(self, type: Attribute | None, tok: Token) -> None:
        """xDSL has no struct format for f80 and f128 values: it could neither print nor store them."""
        if isinstance(type, Float80Type | Float128Type):
            raise self._error(f"{type} values are not supported (xDSL cannot print or store one)", tok)

    def bool_attr(self, children: list[Any]) -> Attribute:
        (tok,) = children
        return IntegerAttr(1 if tok == "true" else 0, i1)

    def _string(self, tok: Token) -> StringAttr:
        return self._string_of(tok.value, tok)

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
        self._check_packable(elem, tok)
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
            if isinstance(elem, IntegerType) and elem.width.data == 0:
                raise self._error("dense array elements of type i0 hold no data", tok)
            self._check_packable(elem, tok)
            items = [v.strip() for v in values_text.split(",")] if values_text.strip() else []
            if (bad := next((v for v in items if not _DENSE_ARRAY_ITEM.fullmatch(v)), None)) is not None:
                raise self._error(f"invalid dense array '{clip(tok)}': '{clip(bad)}' is not a number", tok)
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
            parts = [self._unescape(f'"{p}"', tok) for p in parts]
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

    def _string_of(self, literal: str, tok: Token) -> StringAttr:
        attr = self.attr_cache.get(literal)
        if attr is None:
            attr = self.attr_cache[literal] = StringAttr(self._unescape(literal, tok))
        return attr  # type: ignore[return-value]

    def _loc(self, tok: Token) -> Attribute:
        loc = self.loc_cache.get(tok.value)
        if loc is None:
            text = tok.value
            if text == "loc(unknown)":
                loc = UnknownLoc()
            elif m := _LOC_FILE.fullmatch(text):
                loc = _file_line_col(self._string_of(m[1], tok), self._int(int(m[2])), self._int(int(m[3])))
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
