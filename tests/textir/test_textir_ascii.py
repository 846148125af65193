"""Outside string literals and comments IR text is ASCII, as MLIR's: any other character is a located error.

Python's `\\d`, `\\w` and `\\s` also match other scripts' digits, letters and
spaces; the parser used to read `tensor<٣xf32>` (an Arabic-Indic three) as
`tensor<3xf32>`, as xDSL's own parser still does.  String literals and quoted symbol names keep any Unicode.
"""

from __future__ import annotations

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import StringAttr, SymbolRefAttr
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

from irflow.context import make_context
from irflow.errors import IRParseError
from irflow.textir import parse_module, print_module

FILL = "%a = job.fill {value = 1.0 : f32} : tensor<4xf32>\n"
THREE = "\u0663"  # ARABIC-INDIC DIGIT THREE: str.isdigit() and int() take it


def context() -> Context:
    ctx = make_context()
    ctx.allow_unregistered = True
    return ctx


@pytest.mark.parametrize(
    "text, line, col",
    [
        pytest.param(f"%a = job.fill {{value = 1.0 : f32}} : tensor<{THREE}xf32>\n", 1, 44, id="static-shape"),
        pytest.param(f"%a = job.fill {{value = 1.0 : f32}} : tensor<4x{THREE}x?xf32>\n", 1, 46, id="scanned-shape"),
        pytest.param(f"%a = job.fill {{value = {THREE} : f32}} : tensor<4xf32>\n", 1, 24, id="integer"),
        pytest.param(f"%a = job.fill {{value = 1.{THREE} : f32}} : tensor<4xf32>\n", 1, 26, id="float"),
        pytest.param("%a = job.fill {value = \uff11 : f32} : tensor<4xf32>\n", 1, 24, id="fullwidth-digit"),
        pytest.param(f"%a = job.fill {{value = 1.0 : i{THREE}}} : tensor<4xf32>\n", 1, 31, id="integer-type"),
        pytest.param(FILL + "%b\u540d = job.relu %a : (tensor<4xf32>) -> tensor<4xf32>\n", 2, 3, id="result-name"),
        pytest.param(FILL + "%b = job.relu %a\u540d : (tensor<4xf32>) -> tensor<4xf32>\n", 2, 17, id="operand-name"),
        pytest.param(FILL + "%b = job.relu\u00e9 %a : (tensor<4xf32>) -> tensor<4xf32>\n", 2, 14, id="op-name"),
        pytest.param("%a = job.fill {value = 1.0 : f32,\u540d = 1} : tensor<4xf32>\n", 1, 34, id="key"),
        pytest.param("%a = job.fill {value = 1.0 : f32}\u00a0: tensor<4xf32>\n", 1, 34, id="no-break-space"),
        pytest.param("%a = job.fill\u3000{value = 1.0 : f32} : tensor<4xf32>\n", 1, 14, id="ideographic-space"),
        pytest.param(f"%a = job.fill {{value = 1.0 : f32, d = dense<{THREE}> : tensor<2xi32>}} : tensor<4xf32>\n", 1, 45, id="dense"),
        pytest.param(f"%a = job.fill {{value = 1.0 : f32, d = array<i64: 1, {THREE}>}} : tensor<4xf32>\n", 1, 53, id="array"),
        pytest.param(f"%a = job.fill {{value = 1.0 : f32, s = #job.sbp<split({THREE})>}} : tensor<4xf32>\n", 1, 54, id="dialect-attr"),
        pytest.param(f'%a = job.fill {{value = 1.0 : f32}} : tensor<4xf32> loc("a.py":{THREE}:1)\n', 1, 62, id="location"),
        pytest.param(f'"t.op"() {{m = affine_map<(d{THREE}) -> (d{THREE})>}} : () -> ()\n', 1, 28, id="xdsl-attribute"),
        pytest.param(f'"t.op"() : () -> (!t.x<"\u540d", {THREE}>)\n', 1, 29, id="xdsl-type"),
        pytest.param(f"builtin.module @m{THREE} {{\n}}\n", 1, 18, id="symbol"),
        pytest.param(f'"t.op"() [^bb{THREE}] : () -> ()\n', 1, 14, id="block"),
    ],
)
def test_a_character_outside_ascii_is_an_error_where_it_stands(text: str, line: int, col: int) -> None:
    with pytest.raises(IRParseError) as info:
        parse_module(text, "in.mlir", ctx=context())
    e = info.value
    assert (e.location.line, e.location.col) == (line, col), str(e)
    char = text.splitlines()[line - 1][col - 1]
    shown = f"'{char}' (U+{ord(char):04X})" if char.isprintable() else f"U+{ord(char):04X}"  # a space shows no more
    assert e.message == f"unexpected character {shown}: IR text outside string literals is ASCII"


@pytest.mark.parametrize("item", ["1_0", "+1", "0x1_0", "1e5", "inf", "nan", "1 2"])
def test_dense_array_elements_are_mlir_numbers(item: str) -> None:
    """int() and float() take `1_0`, `+1`, `inf`: each once read as a value, which xDSL's parser refuses."""
    elem = "f64" if item in ("1e5", "inf", "nan") else "i64"
    with pytest.raises(ParseError):
        Parser(context(), f"array<{elem}: {item}>").parse_attribute()
    with pytest.raises(IRParseError) as info:
        parse_module(f"%a = job.fill {{value = 1.0 : f32, d = array<{elem}: {item}>}} : tensor<4xf32>\n")
    assert f"'{item}' is not a number" in info.value.message
    assert (info.value.location.line, info.value.location.col) == (1, 39)


def test_strings_symbols_locations_and_comments_keep_any_unicode() -> None:
    text = (
        '"t.op"() {n = "\u540d\u524d \u0663", s = @"\u540d\u524d"::@"\u00e9t\u00e9"} : () -> () '
        'loc("\u30d5\u30a1\u30a4\u30eb.py":3:1)  // \u30b3\u30e1\u30f3\u30c8 \u0663\n'
    )
    ctx = context()
    module = parse_module(text, ctx=ctx)
    assert module.is_structurally_equivalent(Parser(ctx, text).parse_module())
    op = module.body.block.first_op
    assert op.attributes["n"] == StringAttr("\u540d\u524d \u0663")
    assert op.attributes["s"] == SymbolRefAttr("\u540d\u524d", ["\u00e9t\u00e9"])
    assert op.location.filename.data == "\u30d5\u30a1\u30a4\u30eb.py"
    for form in ({}, {"generic": True, "debuginfo": True}):
        printed = print_module(module, **form)
        assert printed.isascii()  # xDSL escapes the bytes of other characters: "\E5\90\8D"
        again = parse_module(printed, ctx=ctx)
        assert again.is_structurally_equivalent(module)
        assert print_module(again, **form) == printed


def test_a_control_character_is_named_by_its_code_point() -> None:
    with pytest.raises(IRParseError) as info:
        parse_module("%a = job.fill\x00 {value = 1.0 : f32} : tensor<4xf32>\n")
    assert info.value.message.startswith("unexpected character U+0000, expected ")
    assert (info.value.location.line, info.value.location.col) == (1, 14)
