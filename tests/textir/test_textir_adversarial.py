"""Input built to hurt: huge tokens, deep nesting, brackets the grammar does not model.

Memory stays linear in the input, nesting past `MAX_NESTING` is a located
error (never a RecursionError), bracketed tokens are scanned to their balanced
close at any depth, and builtin attributes irflow does not model are read by
xDSL's attribute parser, so whatever xDSL prints, irflow reads.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from xdsl.context import Context
from xdsl.parser import Parser

from irflow.context import make_context
from irflow.errors import IRParseError
from irflow.textir import parse_module, print_module
from irflow.textir.lexer import MAX_NESTING


def context() -> Context:
    ctx = make_context()
    ctx.allow_unregistered = True
    return ctx


def round_trips(text: str) -> str:
    """Parse as xDSL does, print, and read the print back to the same text; the printed op line."""
    ctx = context()
    ours = parse_module(text, ctx=ctx)
    assert ours.is_structurally_equivalent(Parser(ctx, text).parse_module())
    for form in ({}, {"generic": True, "debuginfo": True}):
        printed = print_module(ours, **form)
        assert print_module(parse_module(printed, ctx=ctx), **form) == printed
    return print_module(ours, debuginfo=True).splitlines()[1].strip()


def test_memory_is_linear_in_a_huge_string_attribute() -> None:
    """8 MB in one string: the peak must stay within a few times the input (the old regex took ~380x)."""
    script = (
        "import resource\n"
        "from irflow.textir import parse_module\n"
        "n = 8 << 20\n"
        "text = '%a = job.fill {note = \"' + 'x' * n + '\", value = 1.0 : f32} : tensor<4xf32>\\n'\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "module = parse_module(text)\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print((after - before) * 1024 / n)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert float(out.stdout) < 8.0, f"{out.stdout.strip()} bytes of memory per input byte"


def test_an_error_in_a_huge_line_shows_a_window_of_it() -> None:
    with pytest.raises(IRParseError) as info:
        parse_module('%a = job.fill {note = "' + "x" * 100_000 + '", value = 1.0 : f32} : tensor<4xf32> %\n')
    message, line, caret = str(info.value).splitlines()
    assert message.startswith("<string>:1:100062: error:")
    assert len(line) < 200 and line[caret.index("^")] == "%"


@pytest.mark.parametrize(
    "make, where",
    [
        pytest.param(lambda n: "builtin.module {\n" * n + "}\n" * n, (MAX_NESTING + 1, 16), id="regions"),
        pytest.param(lambda n: '"t.op"() {a = ' + "[" * n + "]" * n + "} : () -> ()\n", (1, 14 + MAX_NESTING), id="arrays"),
        pytest.param(lambda n: '"t.op"() {a = ' + "{b = " * n + "1" + "}" * n + "} : () -> ()\n", (1, 15 + 5 * (MAX_NESTING - 1)), id="dicts"),
        pytest.param(lambda n: '"t.op"() {a = #t.x' + "<" * n + ">" * n + "} : () -> ()\n", (1, 19 + MAX_NESTING), id="in-a-token"),
    ],
)
def test_nesting_deeper_than_the_limit_is_a_located_error(make, where: tuple[int, int]) -> None:
    with pytest.raises(IRParseError) as info:
        parse_module(make(10_000), ctx=context())
    assert f"brackets nested deeper than {MAX_NESTING}" in info.value.message
    assert (info.value.location.line, info.value.location.col) == where


def test_nesting_up_to_the_limit_works_everywhere() -> None:
    text = "builtin.module {\n" * MAX_NESTING + "}\n" * MAX_NESTING
    module = parse_module(text)
    assert print_module(parse_module(print_module(module, generic=True))) == print_module(module)


def test_unclosed_bracketed_token_is_located() -> None:
    with pytest.raises(IRParseError) as info:
        parse_module('"t.op"() {a = #t.x<[1, (2]>} : () -> ()\n', ctx=context())
    assert str(info.value).startswith("<string>:1:15: error: '#t.x<': ']' at offset 7 closes nothing opened here")


def test_locations_nested_to_any_depth() -> None:
    loc = '"a.py":1:2'
    for i in range(12):
        loc = f'callsite({loc} at "f{i}.py":{i}:1)'
    loc = f'fused[{loc}, "b.py":3:4, unknown]'
    line = round_trips(f'"t.op"() : () -> () loc({loc})\n')
    assert line.count("callsite(") == 12 and "fused[" in line


@pytest.mark.parametrize(
    "attr",
    [
        "affine_map<(d0, d1)[s0] -> (d1, d0 + s0)>",
        "affine_set<(d0) : (d0 - 10 >= 0)>",
        "strided<[1, 4], offset: ?>",
        'opaque<"t", "0xDEAD"> : tensor<4xi8>',
        "f8E4M3FN",
        "f8E5M2",
        "memref<4x4xf32, strided<[4, 1], offset: 8>>",
        "memref<4x4xf32, affine_map<(d0, d1) -> (d1, d0)>>",
        "tensor<4x!t.x<<<<<1>>>>>>",
        '!t.x<"a->b", (i32) -> i64>',
        "#t.y<[(1), {a = 2}], <<3>>>",
    ],
)
def test_attributes_the_grammar_does_not_model_go_to_xdsl(attr: str) -> None:
    round_trips(f'"t.op"() {{a = {attr}}} : () -> ()\n')


def test_a_resource_key_names_one_resource_in_a_parse_and_across_parses() -> None:
    """Equal keys are one resource, as MLIR reads them: never renamed `blob1_0`, so printed IR reads back as itself.

    xDSL's own parser renames a key seen before in the process (its resources live on the dialect
    object), once per use.
    """
    text = (
        '"t.op"() {a = dense_resource<blob1> : tensor<4xf32>, b = dense_resource<blob1> : tensor<2xi8>, '
        "c = dense_resource<blob2> : tensor<1xf32>} : () -> ()\n"
    )
    for _ in range(2):  # the second parse finds the keys declared by the first
        printed = print_module(parse_module(text, ctx=context()))
        assert (
            "{a = dense_resource<blob1> : tensor<4xf32>, b = dense_resource<blob1> : tensor<2xi8>, "
            "c = dense_resource<blob2> : tensor<1xf32>}" in printed
        )
        for form in ({}, {"generic": True, "debuginfo": True}):
            printed = print_module(parse_module(text, ctx=context()), **form)
            assert print_module(parse_module(printed, ctx=context()), **form) == printed




@pytest.mark.parametrize(
    "text, col",
    [
        pytest.param('%a = job.fill {value = 1.0 : f32} : tensor<4xf32> loc("' + "a" * 60 + ":1:2)\n", 55, id="unclosed"),
        pytest.param('%a = job.fill {value = 1.0 : f32} : tensor<4xf32> loc("' + "a" * 60 + '\\q":1:2)\n', 55, id="bad-escape"),
        pytest.param('%a = job.fill {value = 1.0 : f32, s = #job.sbp<"' + "a" * 60 + ">} : tensor<4xf32>\n", 48, id="attribute"),
    ],
)
def test_a_bad_string_in_a_bracketed_token_fails_fast_where_it_starts(text: str, col: int) -> None:
    """xDSL's string regex backtracks exponentially on an unclosed string (found by the property tests: a
    `loc("...` took minutes); the body's strings are checked before xDSL reads it.  In a subprocess, so
    that a regression fails within the timeout instead of hanging the suite."""
    script = (
        "import sys\n"
        "from irflow.errors import IRParseError\n"
        "from irflow.textir import parse_module\n"
        "try:\n"
        "    parse_module(sys.stdin.read())\n"
        "except IRParseError as e:\n"
        "    print(e.message, e.location.line, e.location.col)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], input=text, capture_output=True, text=True, timeout=60, check=True)
    message = "a string literal that is never closed, or holds an escape other than \\n \\t \\\" \\\\ \\XX"
    assert out.stdout == f"{message} 1 {col}\n"
