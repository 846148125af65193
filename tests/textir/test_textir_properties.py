"""Property tests: random damage to valid IR is an IRParseError, never another exception.

Seeds are the round-trip lit files in custom and generic form; a mutation
deletes, duplicates or swaps tokens, rewrites a number, inserts a stray
character or cuts the text short.  Whatever still parses must print and
parse back to the same text.
"""

from __future__ import annotations

import pathlib
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from irflow.errors import IRParseError
from irflow.textir import parse_module, print_module

LIT = pathlib.Path(__file__).resolve().parents[1] / "lit" / "dialects"
TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[%^@#!]?[\w.$-]+|->|\S')
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def seeds() -> list[str]:
    texts = []
    for name in ("job.mlir", "buffer.mlir"):
        for chunk in (LIT / name).read_text().split("// -----"):
            body = "\n".join(line for line in chunk.splitlines() if not line.lstrip().startswith("//"))
            if body.strip():
                texts.append(body)
                texts.append(print_module(parse_module(body), generic=True, debuginfo=True))
    return texts


SEEDS = seeds()
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["0x7FC00000", "-0", "1e400", "00", "?", "-"]),
)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    tokens = [m for m in TOKEN.finditer(text)]
    for _ in range(draw(st.integers(1, 3))):
        if not tokens:
            break
        kind = draw(st.sampled_from(["delete", "duplicate", "swap", "number", "insert", "truncate"]))
        i = draw(st.integers(0, len(tokens) - 1))
        start, end = tokens[i].span()
        if kind == "delete":
            text = text[:start] + text[end:]
        elif kind == "duplicate":
            text = text[:end] + " " + text[start:end] + text[end:]
        elif kind == "swap":
            j = draw(st.integers(0, len(tokens) - 1))
            a, b = sorted([tokens[i].span(), tokens[j].span()])
            if a[1] <= b[0]:
                text = text[: a[0]] + text[b[0] : b[1]] + text[a[1] : b[0]] + text[a[0] : a[1]] + text[b[1] :]
        elif kind == "number":
            # Numbers inside strings are left alone: dialects/sbp.py expands a device range
            # such as "0:0-99999999999" device by device (reported to its owner).
            strings = [m.span() for m in STRING.finditer(text)]
            numbers = [m for m in NUMBER.finditer(text) if not any(a <= m.start() < b for a, b in strings)]
            if numbers:
                m = numbers[draw(st.integers(0, len(numbers) - 1))]
                text = text[: m.start()] + draw(NUMBERS) + text[m.end() :]
        elif kind == "insert":
            text = text[:start] + draw(st.sampled_from(list("{}()<>[],:=%^@#!\"'\\x0-?*"))) + text[start:]
        else:
            text = text[:start]
        tokens = list(TOKEN.finditer(text))
    return text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_damaged_ir_is_a_parse_error_or_still_round_trips(text: str) -> None:
    try:
        module = parse_module(text)
    except IRParseError as e:
        assert e.location is not None and e.location.line >= 1 and e.location.col >= 1
        assert str(e).startswith("<string>:")
        return
    for generic in (False, True):
        printed = print_module(module, generic=generic, debuginfo=True)
        assert print_module(parse_module(printed), generic=generic, debuginfo=True) == printed


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('%^@#!"{}()<>[],:=-> \n\tabcijfx0123456789.job')), max_size=80))
def test_random_text_is_a_parse_error_or_a_module(text: str) -> None:
    try:
        parse_module(text)
    except IRParseError:
        pass
