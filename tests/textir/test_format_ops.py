"""Ops read in their class's declarative assembly format: the grammar's `format_op` is made from the formats.

buffer.program, buffer.kernel and func.call are no longer spelled in grammar.lark;
their forms are translated from their `assembly_format`, and a new dialect's op
with such a format parses as xDSL's own parser reads it, with no grammar change.
"""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import DictionaryAttr, MemRefType, StringAttr, SymbolRefAttr
from xdsl.ir import Dialect
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.traits import NoTerminator

from irflow.context import make_context
from irflow.dialects.buffer import KernelOp, ProgramOp
from irflow.errors import IRParseError
from irflow.textir import parse_module, print_module
from irflow.textir.formats import format_plan
from irflow.textir.parser import GRAMMAR, grammar_text


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """A made-up op whose format uses every translated directive: keywords, an optional group, a region."""

    name = "demo2.launch"
    callee = prop_def(SymbolRefAttr)
    device = prop_def(StringAttr)
    config = opt_prop_def(DictionaryAttr)
    args = var_operand_def(MemRefType)
    outs = var_operand_def(MemRefType)
    body = region_def("single_block")
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(NoTerminator())
    assembly_format = (
        "$callee `on` $device (`with` `(` $args^ `:` type($args) `)`)? `into` `[` $outs `:` type($outs) `]` "
        "(`config` $config^)? attr-dict-with-keyword $body"
    )


Demo2 = Dialect("demo2", [LaunchOp])

LAUNCH = """\
%a = buffer.alloc : memref<4xf32>
demo2.launch @k on "cpu" with(%a, %a : memref<4xf32>, memref<4xf32>) into [%a : memref<4xf32>] config {tile = 4 : i64} attributes {note = 1 : i64} {
  %b = buffer.alloc : memref<2xf32>
}
demo2.launch @k on "gpu" into [%a : memref<4xf32>] {
  %c = buffer.alloc : memref<1xf32>
}
"""


def test_grammar_file_spells_no_op_with_a_declarative_format() -> None:
    text = GRAMMAR.read_text()
    assert not any(f'"{name}"' in text for name in ("buffer.program", "buffer.kernel", "func.call"))
    full = grammar_text()
    assert 'FORM_BUFFER_PROGRAM SYMBOL "on" STRING ["attributes" attr_dict] region' in full
    assert format_plan(ProgramOp) is not None and format_plan(KernelOp) is not None


def test_a_new_ops_declarative_format_parses_without_grammar_changes() -> None:
    ctx = make_context()
    ctx.load_dialect(Demo2)
    assert "demo2.launch" not in grammar_text()  # only contexts that hold the op read its form
    ours = parse_module(LAUNCH, ctx=ctx)
    theirs = Parser(ctx, LAUNCH).parse_module()
    assert ours.is_structurally_equivalent(theirs)
    first, second = list(ours.body.block.ops)[1:]
    assert isinstance(first, LaunchOp) and len(first.args) == 2 and first.config is not None
    assert isinstance(second, LaunchOp) and not second.args and second.config is None
    for form in ({}, {"generic": True}, {"debuginfo": True}):
        text = print_module(ours, **form)
        assert print_module(parse_module(text, ctx=ctx), **form) == text
    assert print_module(ours) == print_module(theirs)


PROGRAM = 'buffer.program @p on "cpu" {{\n  %a = buffer.alloc : memref<4xf32>\n  {}\n}}\n'


@pytest.mark.parametrize(
    "text, message",
    [
        ('buffer.program @p "cpu" {\n}\n', "1:19: error: expected 'on', got '\"cpu\"'"),
        ("buffer.program @p on cpu {\n}\n", "1:22: error: expected a string, got 'cpu'"),
        ('buffer.program @p on "cpu" {\n  %a = buffer.alloc : memref<4xf32>\n', "2:36: error: expected an operation, '}' or a block label, got end of input"),
        (PROGRAM.format('buffer.kernel "relu" ins(%a) outs(%a : memref<4xf32>)'), "3:30: error: expected ':', got ')'"),
        (
            PROGRAM.format('buffer.kernel "relu" ins(%a, %a : memref<4xf32>) outs(%a : memref<4xf32>)'),
            "3:28: error: 2 operands but 1 operand types",
        ),
        (PROGRAM.format("buffer.kernel relu outs(%a : memref<4xf32>)"), "3:17: error: expected a string, got 'relu'"),
        (PROGRAM.format('buffer.kernel "relu" outs(%b : memref<4xf32>)'), "3:29: error: use of undefined value %b"),
        (
            PROGRAM.format('buffer.kernel "relu" outs(%a : memref<4xf32>) attributes {operandSegmentSizes = array<i32: 0, 1>}'),
            "3:3: error: attribute operandSegmentSizes is given by the syntax, not the dictionary",
        ),
        (PROGRAM.format('buffer.kernel "relu" outs(%a : memref<4xf32>) {k = 1} {x = 2}'), "3:57: error: expected an operation, .attributes., .}., a block label"),
        (PROGRAM.format('buffer.kernel "relu" ins(%a : memref<4xf32>) outs()'), "3:3: error: 'buffer.kernel' op kernel 'relu' writes no output"),
        ('func.call @f(%x) : (f32) -> ()\n', "1:14: error: use of undefined value %x"),
        ('func.call @f(%x) : () -> ()\n', "1:14: error: 1 operands but 0 operand types"),
    ],
)
def test_malformed_format_ops_are_located_errors(text: str, message: str) -> None:
    with pytest.raises(IRParseError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        parse_module(text)
