"""irflow-opt: flags, diagnostics and exit codes, through main(argv) and one real process."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import irflow.passes
import pytest

from irflow.passes import get_all_passes
from irflow.tools.opt import main
from xdsl.context import Context
from xdsl.dialects.builtin import (
    BytesAttr,
    FileLineColLoc,
    IntAttr,
    ModuleOp,
    StringAttr,
)
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from irflow.errors import CompileError, SourceLocation

GOOD = """\
job.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = job.relu %x : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":2:3)
  %b = job.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  %c = job.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  job.return %c : tensor<4xf32>
}
"""

UNDEFINED = """\
job.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = job.relu %y : (tensor<4xf32>) -> tensor<4xf32>
  job.return %a : tensor<4xf32>
}
"""


@pytest.fixture
def write(tmp_path: Path):
    def write(text: str, name: str = "in.mlir") -> str:
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    return write


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------- passes made up for the tests


@dataclass(frozen=True)
class RaiseCompileError(ModulePass):
    """Fails with a located irflow error."""

    name = "test-raise-compile-error"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise CompileError("cannot lower this", SourceLocation("model.py", 7, 5))


@dataclass(frozen=True)
class RaiseVerifyException(ModulePass):
    name = "test-raise-verify-exception"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise VerifyException("pass precondition does not hold")


@dataclass(frozen=True)
class Crash(ModulePass):
    name = "test-crash"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise KeyError("oops")


@dataclass(frozen=True)
class BreakTypes(ModulePass):
    """Gives the first job.relu a property of the wrong kind, so verification after the pass fails at its loc."""

    name = "test-break-types"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        relu = next(o for o in op.walk() if o.name == "job.relu")
        relu.properties["sbp"] = StringAttr("split")
        relu.location = FileLineColLoc(StringAttr("model.py"), IntAttr(2), IntAttr(3))


@dataclass(frozen=True)
class LossyAttribute(ModulePass):
    """Sets a bytes attribute, which prints as a string literal and reads back as a string."""

    name = "test-lossy-attribute"
    scale: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        op.attributes["x"] = BytesAttr(b"abc")


def _broken() -> type[ModulePass]:
    raise ImportError("cannot import name 'Planner'")


@pytest.fixture(autouse=True)
def extra_passes(monkeypatch: pytest.MonkeyPatch):
    registry = irflow.passes.get_all_passes()
    for cls in (RaiseCompileError, RaiseVerifyException, Crash, BreakTypes, LossyAttribute):
        registry[cls.name] = lambda cls=cls: cls
    registry["test-broken-import"] = _broken
    monkeypatch.setattr(irflow.passes, "get_all_passes", lambda: registry)


# ----------------------------------------------------------------- tests


def test_reads_and_prints(write, capsys) -> None:
    code, out, err = run([write(GOOD)], capsys)
    assert code == 0 and err == ""
    assert out.startswith("builtin.module {\n  job.func @f(%x: tensor<4xf32>) -> tensor<4xf32>")


def test_pipeline_with_print_ir_after_all_and_change(write, capsys) -> None:
    code, out, err = run([write(GOOD), "-p", "cse,dce", "--print-ir-after-all"], capsys)
    assert code == 0
    assert "%c = job.add %a, %a" in out
    assert err.count("// -----// IR Dump After") == 2
    code, out, err = run([write(GOOD), "-p", "cse,dce", "--print-ir-after-change"], capsys)
    assert "IR Dump After cse" in err and "IR Dump After dce" not in err
    code, out, err = run([write(GOOD), "-p", "dce,cse", "--mlir-print-ir-after-change", "--mlir-print-op-generic"], capsys)
    assert "IR Dump After cse" in err and "IR Dump After dce" not in err and '"job.add"' in err


def test_output_file_generic_and_debuginfo(write, tmp_path, capsys) -> None:
    target = tmp_path / "out.mlir"
    code, out, _ = run([write(GOOD), "-o", str(target), "--print-op-generic", "--print-debuginfo"], capsys)
    assert code == 0 and out == ""
    text = target.read_text()
    assert '"job.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":2:3)' in text


def test_stdin_as_dash(monkeypatch, capsys) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(GOOD.encode())))
    code, out, _ = run(["-"], capsys)
    assert code == 0 and "job.func @f" in out


def test_parse_error_is_one_located_line_and_exit_1(write, capsys) -> None:
    path = write(UNDEFINED)
    code, out, err = run([path], capsys)
    assert code == 1 and out == ""
    assert err.splitlines() == [
        f"{path}:2:17: error: use of undefined value %y",
        "  %a = job.relu %y : (tensor<4xf32>) -> tensor<4xf32>",
        "                ^",
    ]


def test_verify_diagnostics_accepts_what_is_expected(write, capsys) -> None:
    annotated = UNDEFINED.replace("  %a = job.relu %y", "  // expected-error@+1 {{use of undefined value %y}}\n  %a = job.relu %y")
    code, out, err = run([write(annotated + "// -----\n" + GOOD), "--split-input-file", "--verify-diagnostics"], capsys)
    assert (code, err) == (0, "")
    assert out.startswith("builtin.module") and "// -----" not in out  # only the chunk that did not fail prints


@pytest.mark.parametrize(
    "annotation, problem",
    [
        pytest.param("", "error: unexpected error: use of undefined value %y", id="unexpected"),
        pytest.param(
            "// expected-error@+1 {{undefined value %z}}",
            'error: error "use of undefined value %y" was emitted, but the expected one differs: "undefined value %z"',
            id="different",
        ),
        pytest.param(
            "// expected-error@+2 {{use of undefined value %y}}",
            'expected error "use of undefined value %y" was not produced (at line 4)',
            id="wrong-line",
        ),
        pytest.param(
            "// expected-warning@+1 {{use of undefined value %y}}",
            "error: unexpected error: use of undefined value %y",
            id="wrong-severity",
        ),
    ],
)
def test_verify_diagnostics_fails_on_any_difference(write, capsys, annotation: str, problem: str) -> None:
    text = UNDEFINED.replace("  %a = job.relu %y", f"  {annotation}\n  %a = job.relu %y")
    code, out, err = run([write(text), "--verify-diagnostics"], capsys)
    assert code == 1 and out == ""
    assert problem in err


def test_verify_diagnostics_fails_when_an_expected_error_does_not_occur(write, capsys) -> None:
    code, _, err = run([write("// expected-error {{never happens}}\n" + GOOD), "--verify-diagnostics"], capsys)
    assert code == 1
    assert err == 'in.mlir:1: error: expected error "never happens" was not produced (at line 1)\n'.replace(
        "in.mlir", str(Path(write("", "unused.mlir")).parent / "in.mlir")
    )


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param(["  %a = job.relu %y : (tensor<4xf32>) -> tensor<4xf32>", "  // expected-error@-1 {{%y}}"], id="minus"),
        pytest.param(["  %a = job.relu %y : (tensor<4xf32>) -> tensor<4xf32>", "  // expected-error@above {{%y}}"], id="above"),
        pytest.param(
            [
                "  // expected-error@below {{use of undefined value}}",
                "  // expected-note@below {{never}}",
                "  %a = job.relu %y : (tensor<4xf32>) -> tensor<4xf32>",
            ],
            id="below",
        ),
        pytest.param(
            ["  %a = job.relu %y : (tensor<4xf32>) -> tensor<4xf32> // expected-error-re {{undefined value %{{[a-z]$}}}}"],
            id="same-line-regex",
        ),
    ],
)
def test_verify_diagnostics_designators(write, capsys, lines: list[str]) -> None:
    text = "job.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n" + "\n".join(lines) + "\n  job.return %a : tensor<4xf32>\n}\n"
    code, _, err = run([write(text), "--verify-diagnostics"], capsys)
    if any("expected-note" in line for line in lines):
        assert code == 1 and err.count("\n") == 1 and 'expected note "never" was not produced' in err
    else:
        assert (code, err) == (0, "")


def test_split_input_file_keeps_line_numbers_and_goes_on(write, capsys) -> None:
    code, out, err = run([write(GOOD + "// -----\n" + UNDEFINED + "// -----\n" + GOOD + "// -----\n" + UNDEFINED), "--split-input-file"], capsys)
    assert code == 1
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert [e.split(":", 1)[1] for e in errors] == ["9:17: error: use of undefined value %y", "21:17: error: use of undefined value %y"]
    assert out.count("job.func @f") == 2 and out.count("// -----\n") == 1


def test_split_input_file_takes_a_marker(write, capsys) -> None:
    code, out, _ = run([write(GOOD + "// ====\n" + GOOD), "--split-input-file=// ===="], capsys)
    assert code == 0 and out.count("builtin.module") == 2
    code, out, err = run([write(GOOD + "// ====\n" + GOOD), "--split-input-file"], capsys)
    assert code == 1 and "Redefinition of symbol \"f\"" in err  # without the marker: one chunk, @f twice


def test_verify_roundtrip(write, capsys) -> None:
    code, _, err = run([write(GOOD), "-p", "cse", "--verify-roundtrip"], capsys)
    assert code == 0 and err == ""
    code, _, err = run([write(GOOD), "-p", "test-lossy-attribute", "--verify-roundtrip"], capsys)
    assert code == 1
    assert "error: round trip of the custom form after test-lossy-attribute changed the IR" in err


def test_list_passes_survives_a_broken_pass(capsys) -> None:
    code, out, err = run(["--list-passes"], capsys)
    assert code == 0
    assert "  autodiff: Builds the backward program" in out
    assert "  cse" in out and "  canonicalize: " in out
    assert "  test-lossy-attribute: Sets a bytes attribute" in out
    assert "      scale: int = 1" in out
    assert "test-broken-import" not in out
    assert "test-broken-import (ImportError: cannot import name 'Planner')" in err


def test_a_broken_pass_only_breaks_pipelines_that_use_it(write, capsys) -> None:
    code, _, err = run([write(GOOD), "-p", "test-broken-import"], capsys)
    assert code == 1
    assert (
        err
        == "irflow-opt: error: pass 'test-broken-import' is not available: ImportError: cannot import name 'Planner'\n"
    )
    assert run([write(GOOD), "-p", "cse"], capsys)[0] == 0


@pytest.mark.parametrize(
    "pipeline, expected",
    [
        (
            "no-such-pass",
            "irflow-opt: error: invalid pass pipeline 'no-such-pass': unknown pass 'no-such-pass'",
        ),
        ("cse{bogus=1}", "irflow-opt: error: invalid pass pipeline 'cse{bogus=1}': unknown option 'bogus' of pass 'cse'"),
        ("test-raise-compile-error", "model.py:7:5: error: cannot lower this"),
        ("test-raise-verify-exception", "in.mlir: error: pass precondition does not hold"),
        ("test-crash", "in.mlir: error: internal error: KeyError: 'oops'"),
        ("test-break-types", "model.py:2:3: error: 'job.relu' op"),
    ],
)
def test_pass_failures_are_diagnostics(write, capsys, pipeline: str, expected: str) -> None:
    code, _, err = run([write(GOOD), "-p", pipeline], capsys)
    assert code == 1
    assert expected in err.splitlines()[0]
    assert "Traceback" not in err


def test_missing_input_file(tmp_path, capsys) -> None:
    code, _, err = run([str(tmp_path / "nope.mlir")], capsys)
    assert code == 1 and err.startswith("irflow-opt: error: ") and "nope.mlir" in err


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("irflow-opt ")


def test_a_real_process_exits_1_without_traceback(write) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "irflow.tools.opt", write(UNDEFINED)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "error: use of undefined value %y" in proc.stderr and "Traceback" not in proc.stderr


def test_input_that_is_not_utf8_is_a_located_error(tmp_path, capsys) -> None:
    path = tmp_path / "bad.mlir"
    path.write_bytes(b'%a = job.variable {name = "w\xff"} : tensor<4xf32>\n')
    code, out, err = run([str(path)], capsys)
    assert code == 1 and out == ""
    assert err.startswith(f"{path}:1:29: error: input is not valid UTF-8")
    assert "Traceback" not in err and "internal error" not in err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["-p", "cse{"], "invalid pass pipeline 'cse{' at column 5: expected argument name here"),
        (["-p", "cse,,dce"], "invalid pass pipeline 'cse,,dce' at column 5: expected pass name here"),
        (["-p", "builtin.module(cse"], "invalid pass pipeline 'builtin.module(cse': expected 'builtin.module(...)'"),
        (["-p", "builtin.module(func.func(cse))"], "only module passes are supported, not nested op pipelines"),
        (["--pass-pipeline", "cse"], "--pass-pipeline expects 'builtin.module(...)', got 'cse'"),
        (["-p", "cse", "--pass-pipeline=builtin.module(dce)"], "give the pipeline with -p or with --pass-pipeline"),
        (
            ["-p", "plan-memory{alignment=100}"],
            "option 'alignment' of pass 'plan-memory': must be a power of two, got 100",
        ),
        (["-p", "plan-memory{alignment=0}"], "option 'alignment' of pass 'plan-memory': must be a power of two, got 0"),
        (["-p", "plan-memory{alignment=x}"], "option 'alignment' of pass 'plan-memory': Incompatible types"),
        (["-p", "cse{in-place=1}"], "unknown option 'in-place' of pass 'cse' (it takes no options)"),
    ],
)
def test_malformed_pipelines_are_clean_errors(write, capsys, argv: list[str], expected: str) -> None:
    code, out, err = run([write(GOOD), *argv], capsys)
    assert code == 1 and out == ""
    assert err.startswith("irflow-opt: error: ") and expected in err and err.count("\n") == 1


def test_pass_pipeline_in_mlir_form(write, capsys) -> None:
    plain = run([write(GOOD), "-p", "cse,dce"], capsys)
    assert run([write(GOOD), "--pass-pipeline=builtin.module(cse, dce)"], capsys) == plain
    assert run([write(GOOD), "-p", "builtin.module(cse,dce)"], capsys) == plain
    assert plain[0] == 0 and "%c = job.add %a, %a" in plain[1]


def test_mlir_spellings_of_the_print_flags(write, capsys) -> None:
    old = run([write(GOOD), "-p", "cse", "--print-op-generic", "--print-debuginfo", "--print-ir-after-all"], capsys)
    new = run([write(GOOD), "-p", "cse", "--mlir-print-op-generic", "--mlir-print-debuginfo", "--mlir-print-ir-after-all"], capsys)
    assert old == new
    assert 'loc("model.py":2:3)' in new[1] and '"job.add"' in new[1] and "IR Dump After cse" in new[2]


def test_time_passes_prints_a_table(write, capsys) -> None:
    code, out, err = run([write(GOOD), "-p", "cse,dce,cse", "--time-passes"], capsys)
    assert code == 0 and out.startswith("builtin.module")
    rows = [line.split(")  ", 1) for line in err.splitlines() if "%)  " in line]
    names = [name for _, name in rows]
    assert names == ["parse and verify", "cse #1", "verify", "dce", "cse #3", "print", "Total"]
    seconds = [float(row[0].split("(")[0]) for row in rows]
    assert abs(sum(seconds[:-1]) - seconds[-1]) < 1e-3
    assert "Total Execution Time" in err


def test_every_flag_in_help_is_known_and_tested(capsys) -> None:
    """A flag added to --help must be added here, with a test of what it does."""
    with pytest.raises(SystemExit):
        main(["--help"])
    flags = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", capsys.readouterr().out))
    assert flags == {
        "-h", "--help", "-o", "--output-file", "-p", "--passes", "--pass-pipeline", "--split-input-file",
        "--verify-diagnostics", "--verify-roundtrip", "--mlir-print-ir-after-all", "--print-ir-after-all",
        "--mlir-print-ir-after-change", "--print-ir-after-change", "--mlir-print-op-generic", "--print-op-generic",
        "--mlir-print-debuginfo", "--print-debuginfo", "--time-passes", "--disable-verify",
        "--allow-unregistered-dialect", "--no-implicit-module", "--list-passes", "--emit", "--version",
    }  # fmt: skip


def test_list_passes_lists_what_applies_to_irflow(capsys) -> None:
    code, out, _ = run(["--list-passes"], capsys)
    listed = {line.split(":")[0].strip() for line in out.splitlines()[1:] if line.startswith("  ") and not line.startswith("      ")}
    irflow_own = set(get_all_passes())
    assert {"autodiff", "optimizer", "convert-job-to-buffer", "plan-memory"} <= irflow_own <= listed
    assert listed - irflow_own - {name for name in listed if name.startswith("test-")} == {"canonicalize", "cse", "dce"}


def test_other_flags(write, capsys, tmp_path) -> None:
    text = '"foo.op"() : () -> ()\n'
    assert run([write(text), "--allow-unregistered-dialect"], capsys)[0] == 0
    assert "unknown operation 'foo.op'" in run([write(text)], capsys)[2]
    assert "expected a single builtin.module" in run([write(GOOD), "--no-implicit-module"], capsys)[2]
    bad = GOOD.replace("%c = job.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>", "%c = job.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>")
    bad = bad.replace("job.return %c : tensor<4xf32>", "job.return %a : tensor<4xf32>")
    assert run([write(bad)], capsys)[0] == 1
    assert run([write(bad), "--disable-verify"], capsys)[0] == 0


@pytest.mark.parametrize(
    "text, pipeline, expected",
    [
        (GOOD, "plan-memory", "error: plan-memory found no buffer.program to plan: run convert-job-to-buffer first"),
        ('buffer.program @p on "cpu" {\n  %a = buffer.alloc : memref<4xf32>\n}\n', "convert-job-to-buffer", "error: convert-job-to-buffer found no job.func to lower"),
    ],
)
def test_passes_say_when_the_ir_is_not_theirs(write, capsys, text: str, pipeline: str, expected: str) -> None:
    code, _, err = run([write(text), "-p", pipeline], capsys)
    assert code == 1 and expected in err


def test_memory_plan_columns_stay_aligned_for_long_names(write, capsys) -> None:
    long = "a_value_with_a_name_much_longer_than_forty_characters_in_all"
    text = GOOD.replace("%a", f"%{long}")
    code, out, err = run([write(text), "-p", "convert-job-to-buffer,plan-memory", "--emit=memory-plan"], capsys)
    assert code == 0, err
    header, *rows = out.splitlines()[1:]
    assert any(row.startswith(long) for row in rows) and rows[0].startswith("input 0 %x")
    # every number column ends where its header ends
    for column in ("bytes", "offset", "lifetime"):
        end = header.index(column) + len(column)
        assert all(row[end - 1] in "0123456789]" and row[end : end + 1] in ("", " ") for row in rows), column
