"""irflow's fast printer prints exactly the bytes of xDSL's Printer (with sorted dictionaries).

The oracle is `SortedPrinter`, xDSL's own `Printer` with nothing changed but
the order of dictionary entries.  Compared in all four forms (custom/generic,
with/without locations) on every lit input, every stage of the MLP and LeNet
jobs (train and predict), and on random modules built op by op from every
job, buffer and func op, xDSL's test ops, random attributes, name hints,
block arguments and successors.
"""

from __future__ import annotations

import importlib.util
import pathlib
from io import StringIO

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import (
    ArrayAttr,
    CallSiteLoc,
    DenseArrayBase,
    DictionaryAttr,
    FileLineColLoc,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NameLoc,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    UnitAttr,
    UnknownLoc,
    f16,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.dialects.func import Func
from xdsl.dialects import test as xdsl_test
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import AttrSizedOperandSegments, IRDLOperation, OptOperandDef, OptResultDef, VarOperandDef, VarResultDef
from xdsl.parser import Parser

from irflow.context import make_context
from irflow.dialects.buffer import Buffer
from irflow.dialects.job import Job
from irflow.textir import parse_module, print_module
from irflow.textir.printer import SortedPrinter

ROOT = pathlib.Path(__file__).resolve().parents[2]
FORMS = [
    {},
    {"generic": True},
    {"debuginfo": True},
    {"generic": True, "debuginfo": True},
]


def reference(op: Operation, generic: bool = False, debuginfo: bool = False) -> str:
    stream = StringIO()
    SortedPrinter(stream=stream, print_generic_format=generic, print_debuginfo=debuginfo).print_op(op)
    stream.write("\n")
    return stream.getvalue()


def outcome(print_fn, op: Operation, form: dict[str, bool]) -> str:
    """The printed text, or the kind of exception printing raised (both printers must agree on it)."""
    try:
        return print_fn(op, **form)
    except Exception as e:  # noqa: BLE001 - compared, not hidden
        return f"raised {type(e).__name__}"


def assert_same_as_xdsl(module: Operation) -> None:
    for form in FORMS:
        assert outcome(print_module, module, form) == outcome(reference, module, form), form


# ----------------------------------------------------------------- real IR


def _lit_chunks() -> list[pytest.param]:
    spec = importlib.util.spec_from_file_location("textir_roundtrip", pathlib.Path(__file__).with_name("test_textir_roundtrip.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.lit_chunks()


@pytest.mark.parametrize("chunk", _lit_chunks())
def test_lit_inputs_print_as_xdsl_prints_them(chunk: str) -> None:
    ctx = make_context()
    ctx.load_dialect(xdsl_test.Test)
    assert_same_as_xdsl(Parser(ctx, chunk).parse_module())


def _stages_module():
    path = ROOT / "tests" / "tools" / "test_example_stages.py"
    spec = importlib.util.spec_from_file_location("example_stages", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


STAGES = _stages_module()


@pytest.mark.parametrize("job", STAGES.JOBS, ids=["-".join(j) for j in STAGES.JOBS])
def test_every_stage_of_the_example_jobs_prints_as_xdsl_prints_it(job: tuple[str, str]) -> None:
    exe = STAGES.build(*job).executable()
    assert len(exe.stages) >= 8
    for stage in exe.stages:
        assert_same_as_xdsl(parse_module(exe.ir(stage)))


# ----------------------------------------------------------------- random IR

NAMES = st.sampled_from(["x", "a", "x_1", "w-1", "conv1_weight", "v0", "bb"]) | st.none()
SCALARS = st.sampled_from([i1, i32, i64, f16, f32, f64, IndexType()])
SHAPES = st.lists(st.integers(1, 4), max_size=3)
TYPES = st.builds(TensorType, SCALARS, SHAPES) | st.builds(MemRefType, SCALARS, SHAPES) | SCALARS
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8) | st.sampled_from(
    ["", "plain", 'q"uote', "back\\slash", "new\nline", "tab\t", "é", "kind"]
)


def _float(type_: Attribute) -> st.SearchStrategy[Attribute]:
    width = {f16: 16, f32: 32, f64: 64}[type_]  # type: ignore[index]
    return st.floats(width=width).map(lambda v: FloatAttr(v, type_))  # type: ignore[arg-type]


LEAVES = st.one_of(
    st.integers(-(2**31), 2**31 - 1).map(lambda v: IntegerAttr(v, i64)),
    st.integers(0, 1).map(lambda v: IntegerAttr(v, i1)),
    st.integers(-5, 5).map(lambda v: IntegerAttr(v, IndexType())),
    _float(f16),
    _float(f32),
    _float(f64),
    TEXT.map(StringAttr),
    st.just(UnitAttr()),
    TYPES,
    st.lists(st.integers(-9, 9), max_size=4).map(lambda v: DenseArrayBase.from_list(i64, v)),
    st.lists(st.floats(allow_nan=False, width=64), max_size=3).map(lambda v: DenseArrayBase.from_list(f64, v)),
    st.builds(lambda a, b: SymbolRefAttr(a, b), st.sampled_from(["f", "a.b", "with space"]), st.lists(st.sampled_from(["g", "h i"]), max_size=2)),
    st.sampled_from(
        [
            "#job.nd_sbp<[split(0), broadcast]>",
            "#job.sbp<partial_sum>",
            '#job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>',
            "affine_map<(d0, d1) -> (d1, d0)>",
            "dense<[1.5, -2.0]> : tensor<2xf32>",
        ]
    ).map(lambda text: Parser(make_context(), text).parse_attribute()),
)
ATTRS = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3).map(ArrayAttr)
    | st.dictionaries(TEXT, inner, max_size=3).map(DictionaryAttr),
    max_leaves=6,
)
LOCS = st.recursive(
    st.just(UnknownLoc())
    | st.builds(FileLineColLoc, TEXT.map(StringAttr), st.integers(0, 99).map(IntAttr), st.integers(0, 99).map(IntAttr)),
    lambda inner: st.builds(CallSiteLoc, inner, inner) | st.builds(lambda n, c: NameLoc(StringAttr(n), c), TEXT, inner),
    max_leaves=3,
)
OPS = [
    cls
    for dialect in (Job, Buffer, Func)
    for cls in dialect.operations
    if issubclass(cls, IRDLOperation) and not cls.get_irdl_definition().regions
]


def _count(draw: st.DrawFn, definition: object) -> int:
    if isinstance(definition, VarOperandDef | VarResultDef):
        return draw(st.integers(0, 2))
    if isinstance(definition, OptOperandDef | OptResultDef):
        return draw(st.integers(0, 1))
    return 1


@st.composite
def random_op(draw: st.DrawFn, values: list[SSAValue]) -> Operation:
    """An op of a random class with operand and result counts its definition allows, random
    properties (its own and others) and attributes; names and types of values at random."""
    cls = draw(st.sampled_from(OPS))
    op_def = cls.get_irdl_definition()
    operand_counts = [_count(draw, d) for _, d in op_def.operands]
    available = values or [None]
    operands = [[draw(st.sampled_from(available)) for _ in range(n)] for n in operand_counts]
    if None in [v for group in operands for v in group]:
        return xdsl_test.TestOp(result_types=[draw(TYPES)], attributes=draw(st.dictionaries(TEXT, ATTRS, max_size=2)))
    properties = {name: draw(ATTRS) for name in op_def.properties if draw(st.booleans())}
    if any(isinstance(o, AttrSizedOperandSegments) for o in op_def.options):
        properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, operand_counts)
    result_types = [[draw(TYPES) for _ in range(_count(draw, d))] for _, d in op_def.results]
    op = cls.create(
        operands=[v for group in operands for v in group],
        result_types=[t for group in result_types for t in group],
        properties=properties,
        attributes=draw(st.dictionaries(st.sampled_from(["sbp_in", "tag", "a b", "x"]), ATTRS, max_size=2)),
    )
    return op


@st.composite
def random_module(draw: st.DrawFn) -> ModuleOp:
    """Ops of every job, buffer and func class, and test ops holding regions of several blocks
    with arguments, successors between them, locations and name hints (repeated, so that
    xDSL's `_1` suffixes appear)."""
    values: list[SSAValue] = []

    def named(new: list[SSAValue]) -> None:
        for v in new:
            v.name_hint = draw(NAMES)
        values.extend(new)

    def ops(depth: int) -> list[Operation]:
        out = []
        for _ in range(draw(st.integers(1, 4))):
            if depth < 2 and draw(st.integers(0, 4)) == 0:
                blocks = [Block(arg_types=draw(st.lists(TYPES, max_size=2))) for _ in range(draw(st.integers(1, 3)))]
                for block in blocks:
                    named(list(block.args))
                    for arg in block.args:
                        arg.location = draw(LOCS)
                    for op in ops(depth + 1):
                        block.add_op(op)
                    block.add_op(xdsl_test.TestTermOp.create(successors=draw(st.lists(st.sampled_from(blocks), max_size=2))))
                op = xdsl_test.TestOp(
                    operands=values[-1:],
                    result_types=draw(st.lists(TYPES, max_size=2)),
                    regions=[Region(blocks)],
                    properties={"prop1": draw(ATTRS)} if draw(st.booleans()) else {},
                )
            else:
                op = draw(random_op(values))
            named(list(op.results))
            op.location = draw(LOCS)
            out.append(op)
        return out

    return ModuleOp(ops(0))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_module())
def test_random_modules_print_as_xdsl_prints_them(module: ModuleOp) -> None:
    assert_same_as_xdsl(module)


def test_a_printer_failure_is_xdsls_failure() -> None:
    """An op whose attribute has the name of a property it prints in its attribute dictionary:
    xDSL's declarative printer refuses it, and so does the fast printer, with the same error."""
    module = parse_module('%v = job.variable {name = "w"} : tensor<2xf32>', verify=False)
    op = next(iter(module.body.block.ops))
    op.attributes["name"] = StringAttr("clash")
    with pytest.raises(ValueError, match="Cannot print attributes and properties with the same name"):
        reference(module)
    with pytest.raises(ValueError, match="Cannot print attributes and properties with the same name"):
        print_module(module)
