"""irflow-opt: flags, diagnostics and exit codes, through main(argv) and one real process."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import irflow.passes
import pytest
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


def test_verify_diagnostics_prints_and_continues(write, capsys) -> None:
    code, out, err = run([write(UNDEFINED + "// -----\n" + GOOD), "--split-input-file", "--verify-diagnostics"], capsys)
    assert code == 0 and err == ""
    first, second = out.split("// -----\n")
    assert ":2:17: error: use of undefined value %y" in first
    assert second.startswith("builtin.module")


def test_split_input_file_keeps_line_numbers(write, capsys) -> None:
    code, _, err = run([write(GOOD + "// -----\n" + UNDEFINED), "--split-input-file"], capsys)
    assert code == 1
    assert ":9:17: error: use of undefined value %y" in err.splitlines()[0]


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
            "irflow-opt: error: invalid pass pipeline 'no-such-pass': Unrecognized passes: ['no-such-pass']",
        ),
        ("cse{bogus=1}", "irflow-opt: error: invalid pass pipeline 'cse{bogus=1}'"),
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
