"""A dialect's ops bring their own syntax: a new dialect parses without any change to grammar.lark.

`demo` is defined here and nowhere else: a function-like op whose custom form
is func.func's (irflow's `FuncSyntax` mixin, the one job.func uses: its
`from_syntax` gives the form a meaning and its xDSL parse hook calls it too), an op in the shared plain form with an attribute
dictionary, and a terminator.  irflow's parser must read all three and build
what xDSL's own parser builds, and the text must round-trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import pytest
from xdsl.dialects.builtin import FunctionType, IntegerAttr, StringAttr, TensorType, i64
from xdsl.ir import Attribute, Dialect
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, SymbolOpInterface

from irflow.context import make_context
from irflow.dialects.func_syntax import FuncSyntax
from irflow.errors import IRParseError
from irflow.textir import parse_module, print_module


@irdl_op_definition
class GraphOp(FuncSyntax):
    """`demo.graph @g(%x: t) -> t attributes {stage = 2} {...}`: `stage` is a property, 0 when left out."""

    name = "demo.graph"
    body = region_def("single_block")
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    stage = prop_def(IntegerAttr)
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())
    SYNTAX_PROPERTY: ClassVar[str] = "stage"
    SYNTAX_DEFAULT: ClassVar[Attribute] = IntegerAttr(0, i64)


@irdl_op_definition
class ScaleOp(IRDLOperation):
    name = "demo.scale"
    input = operand_def(TensorType)
    res = result_def(TensorType)
    factor = opt_prop_def(IntegerAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` functional-type($input, $res)"


@irdl_op_definition
class YieldOp(IRDLOperation):
    name = "demo.yield"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(GraphOp))
    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, values: Sequence) -> None:
        super().__init__(operands=[values])


Demo = Dialect("demo", [GraphOp, ScaleOp, YieldOp])

TEXT = """\
demo.graph @g(%x: tensor<4xf32>) -> tensor<4xf32> attributes {note = "n", stage = 2 : i64} {
  %y = demo.scale %x {factor = 3 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %z = demo.scale %y : (tensor<4xf32>) -> tensor<4xf32>
  demo.yield %z : tensor<4xf32>
}
demo.graph @h() {
  demo.yield
}
"""


def demo_context():
    ctx = make_context()
    ctx.load_dialect(Demo)
    return ctx


def test_a_new_dialects_custom_forms_parse_without_grammar_changes() -> None:
    ctx = demo_context()
    ours = parse_module(TEXT, ctx=ctx)
    theirs = Parser(ctx, TEXT).parse_module()
    assert ours.is_structurally_equivalent(theirs)
    g, h = ours.body.block.ops
    assert isinstance(g, GraphOp) and g.stage.value.data == 2 and g.attributes == {"note": StringAttr("n")}
    assert isinstance(h, GraphOp) and h.stage.value.data == 0  # the default lives in from_syntax
    for form in ({}, {"generic": True}, {"debuginfo": True}):
        text = print_module(ours, **form)
        assert print_module(parse_module(text, ctx=ctx), **form) == text
    assert "demo.scale %y : (tensor<4xf32>) -> tensor<4xf32>" in print_module(ours)


@pytest.mark.parametrize(
    "text, message",
    [
        ("demo.graph private @g() {\n  demo.yield\n}\n", "1:12: error: 'demo.graph' takes no visibility"),
        ('demo.graph @g(%x: tensor<4xf32> {a = 1}) {\n  demo.yield\n}\n', "'demo.graph' takes no argument or result attributes"),
        ("demo.scale @g() {\n}\n", "'demo.scale' has no function-like custom form"),
    ],
)
def test_function_like_form_errors_name_the_op(text: str, message: str) -> None:
    with pytest.raises(IRParseError, match=message):
        parse_module(text, ctx=demo_context())
