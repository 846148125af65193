"""Property tests: random damage to valid IR is an IRParseError at a line and column of the text, never another exception.

Seeds are the valid inputs of every lit file and every stage of the example
MLP train and LeNet predict jobs (as `IRFLOW_DUMP_IR` writes them), in custom
form with locations and in generic form.  A mutation deletes, duplicates,
swaps or replaces tokens (with one of the text's own or an odd one), rewrites
a number, inserts, deletes or replaces a character (other scripts' digits and
spaces included), duplicates, deletes or swaps lines, or cuts the text short.
An error must point inside the text and not be a Python error the parser
wrapped (`invalid IR: TypeError: ...`); whatever still parses must print and
parse back to the same text.  The examples are derandomized: CI runs the same
few hundred every time, in a few seconds.
"""

from __future__ import annotations

import builtins
import functools
import pathlib
import re
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_example_stages import build

from irflow.errors import IRParseError
from irflow.textir import parse_module, print_module
from irflow.textir.builder import source_lines

LIT = pathlib.Path(__file__).resolve().parents[1] / "lit"
TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[%^@#!]?[\w.$-]+|->|\S')
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
NUMBERS = [
    "0", "-0", "00", "1e400", "-1e400", "0x7FC00000", "0x", "?", "-", "18446744073709551616",
    "-9223372036854775809", "99999999999999999999999", "1.5", "-2.", "1.0e-999", "\u0663", "\uff11",
]  # fmt: skip
ODD_TOKENS = NUMBERS + [
    "tensor<", "tensor<?x?xf32>", "tensor<*xf32>", "memref<4xf32, strided<[1]>>", "vector<[4]xf32>", "i0", "i99999999",
    "f8E4M3FN", "f80", "f128", "index", "none", "complex<f32>", "tensor<2xcomplex<f32>>", "tuple<>", "dense<", "dense<[]>", "dense<[[1], [2, 3]]>",
    "dense<0x>", "array<", "array<i1: true>", "array<f32: 0x7F800000>", "loc(", "loc(unknown)", 'loc("a":1:2)',
    "loc(fused[])", "#job.sbp<split(99)>", "#job.nd_sbp<[]>", "#job.placement<>", "#job.", "!job.", "!t.x<>",
    "affine_map<() -> ()>", "%", "%0#5", "%x:0 =", "^", "^bb0:", "^bb9", "@", "@a::@b", '@"\\FF"', '"', '"\\FF"',
    '"\\', "unit", "true", "{", "}", "(", ")", "<", ">", "[", "]", ",", ":", "=", "->", "builtin.module",
    "func.func", "job.func", "func.return", "job.return", "private", "attributes", '"job.relu"', '"t.op"',
    "// comment", "\u540d", "\u00a0", "\u2028",
]  # fmt: skip
CHARS = list("{}()<>[],:=%^@#!\"'\\x0-?*.e \n\t\r") + ["\u0663", "\u540d", "\u00a0", "\u2028", "\x00", "\x7f"]
KINDS = [
    "delete", "duplicate", "swap", "replace", "odd-token", "number", "insert-char", "delete-char", "replace-char",
    "duplicate-line", "delete-line", "swap-lines", "truncate",
]  # fmt: skip
# A crash the parser or a verifier wrapped (`invalid IR: TypeError: ...`, `failed to verify (KeyError: ...)`)
# instead of saying what is wrong.
PYTHON_ERRORS = "|".join(n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException))
CRASH = re.compile(rf"(?:invalid IR: |failed to verify \()(?:{PYTHON_ERRORS}):")


@functools.cache
def seeds() -> tuple[str, ...]:
    texts: list[str] = []
    for path in sorted(LIT.rglob("*.mlir")):
        text = path.read_text()
        if "--verify-diagnostics" in text:
            continue
        for chunk in text.split("// -----"):
            body = "\n".join(line for line in chunk.splitlines() if not line.lstrip().startswith("//"))
            try:
                module = parse_module(body)
            except IRParseError:
                continue  # the failing input of a pass's error test
            texts += [print_module(module, debuginfo=True), print_module(module, generic=True, debuginfo=True)]
    for model, job_type in (("mlp", "train"), ("lenet", "predict")):
        exe = build(model, job_type).executable()
        texts += [exe.ir(stage) for stage in exe.stages]
    return tuple(dict.fromkeys(t for t in texts if t.strip()))


def mutate(text: str, pick: Callable[[int], int], rounds: int) -> str:
    """`text` damaged `rounds` times; `pick(n)` chooses a number below n (hypothesis draws them)."""
    for _ in range(rounds):
        tokens = list(TOKEN.finditer(text))
        lines = text.split("\n")
        if not tokens:
            break
        kind = KINDS[pick(len(KINDS))]
        start, end = tokens[pick(len(tokens))].span()
        at = pick(len(text) + 1)
        if kind == "delete":
            text = text[:start] + text[end:]
        elif kind == "duplicate":
            text = text[:end] + " " + text[start:end] + text[end:]
        elif kind == "swap":
            a, b = sorted([(start, end), tokens[pick(len(tokens))].span()])
            if a[1] <= b[0]:
                text = text[: a[0]] + text[b[0] : b[1]] + text[a[1] : b[0]] + text[a[0] : a[1]] + text[b[1] :]
        elif kind == "replace":
            text = text[:start] + tokens[pick(len(tokens))].group() + text[end:]
        elif kind == "odd-token":
            text = text[:start] + ODD_TOKENS[pick(len(ODD_TOKENS))] + text[end:]
        elif kind == "number":
            # Numbers inside strings are left alone: dialects/sbp.py expands a device range
            # such as "0:0-99999999999" device by device (reported to its owner).
            strings = [m.span() for m in STRING.finditer(text)]
            numbers = [m for m in NUMBER.finditer(text) if not any(a <= m.start() < b for a, b in strings)]
            if numbers:
                m = numbers[pick(len(numbers))]
                text = text[: m.start()] + NUMBERS[pick(len(NUMBERS))] + text[m.end() :]
        elif kind == "insert-char":
            text = text[:at] + CHARS[pick(len(CHARS))] + text[at:]
        elif kind == "delete-char":
            text = text[:at] + text[at + 1 :]
        elif kind == "replace-char":
            text = text[:at] + CHARS[pick(len(CHARS))] + text[at + 1 :]
        elif kind in ("duplicate-line", "delete-line", "swap-lines"):
            i, j = pick(len(lines)), pick(len(lines))
            if kind == "duplicate-line":
                lines.insert(i, lines[i])
            elif kind == "delete-line":
                del lines[i]
            else:
                lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        else:
            text = text[:at]
    return text


@st.composite
def mutated(draw: st.DrawFn) -> str:
    texts = seeds()
    text = texts[draw(st.integers(0, len(texts) - 1))]
    return mutate(text, lambda n: draw(st.integers(0, n - 1)), draw(st.integers(1, 3)))


def check(text: str) -> None:
    """Parsing `text` gives a module that prints and reads back as itself, or an error located inside `text`."""
    try:
        module = parse_module(text)
    except IRParseError as e:
        assert not CRASH.search(e.message), str(e)
        assert e.message.strip() and not e.message.endswith(":") and "error: " not in e.message, str(e)
        lines = source_lines(text)
        assert e.location is not None and 1 <= e.location.line <= len(lines), str(e)
        assert 1 <= e.location.col <= len(lines[e.location.line - 1]) + 1, str(e)
        assert str(e).startswith(f"<string>:{e.location.line}:{e.location.col}: error: ")
        return
    for generic in (False, True):
        printed = print_module(module, generic=generic, debuginfo=True)
        assert print_module(parse_module(printed), generic=generic, debuginfo=True) == printed


@settings(max_examples=400, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(mutated())
def test_damaged_ir_is_a_located_parse_error_or_still_round_trips(text: str) -> None:
    check(text)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.text(alphabet=st.sampled_from(list('%^@#!"{}()<>[],:=-> \n\tabcijfx0123456789.job\u0663')), max_size=80))
def test_random_text_is_a_parse_error_or_a_module(text: str) -> None:
    check(text)
