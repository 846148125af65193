"""The compiler verifies through irflow.textir.verification: after every pass, as irflow-opt does, or
(compiling a job) once at the end, naming the same pass where something fails."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.passes import ModulePass

import irflow.compiler as compile_module
from irflow.errors import CompileError, IRParseError
from irflow.textir import parse_module

JOB = """\
job.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = job.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  job.return %a : tensor<4xf32>
}
"""


@dataclass(frozen=True)
class ShadowProperty(ModulePass):
    """Sets an attribute named like job.relu's `sbp` property, which verification refuses."""

    name = "test-shadow-property"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        relu = next(o for o in op.walk() if o.name == "job.relu")
        relu.attributes["sbp"] = StringAttr("split")
        relu.location = FileLineColLoc(StringAttr("model.py"), IntAttr(9), IntAttr(3))


def test_the_compiler_reports_the_failing_op_at_its_location(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compile_module, "available_passes", lambda: {ShadowProperty.name: lambda: ShadowProperty})
    with pytest.raises(CompileError) as info:
        compile_module.run_pipeline(parse_module(JOB), ShadowProperty.name)
    assert str(info.value).startswith(
        "model.py:9:3: error: IR after 'test-shadow-property' does not verify: 'job.relu' op attribute 'sbp' "
        "has the name of a property of job.relu"
    )


class Crash(ModulePass):
    """Fails as a pass does on IR it did not expect."""

    name = "test-crash"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise RuntimeError("unexpected IR")


class Nothing(ModulePass):
    name = "test-nothing"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pass


@pytest.mark.parametrize("after", ["test-nothing", "test-crash"])
def test_compiling_names_the_pass_that_broke_the_ir(monkeypatch: pytest.MonkeyPatch, after: str) -> None:
    """`apply_pipeline` verifies only the result, yet where it (or a later pass that crashes) fails,
    the error is the one verifying after every pass gives, even with a pass run twice."""
    passes = {p.name: (lambda p=p: p) for p in (ShadowProperty, Crash, Nothing)}
    monkeypatch.setattr(compile_module, "available_passes", lambda: passes)
    spec = f"test-nothing,{ShadowProperty.name},{after}"
    errors = []
    for run in (compile_module.run_pipeline, compile_module.apply_pipeline):
        with pytest.raises(CompileError) as info:
            run(parse_module(JOB), spec)
        errors.append(str(info.value))
    assert errors[0] == errors[1]
    assert errors[1].startswith("model.py:9:3: error: IR after 'test-shadow-property' does not verify")
    # A crash on IR that verifies is the crash itself.
    with pytest.raises(RuntimeError, match="unexpected IR"):
        compile_module.apply_pipeline(parse_module(JOB), "test-nothing,test-crash")


RELUS = """\
job.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = job.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  %b = job.relu %a : (tensor<4xf32>) -> tensor<4xf32>
  %c = job.relu %b : (tensor<4xf32>) -> tensor<4xf32>
  %d = job.relu %c : (tensor<4xf32>) -> tensor<%s>
  job.return %a : tensor<4xf32>
}
"""


def test_a_repeated_signature_is_verified_once_and_a_bad_one_still_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from irflow.dialects.job import ReluOp
    from irflow.textir.verification import first_verify_failure

    checks: list[object] = []
    check = ReluOp.check.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(ReluOp, "check", classmethod(lambda cls, *a: checks.append(a) or check(cls, *a)))
    parse_module(RELUS.replace("%s", "4xf32"))
    assert len(checks) == 1  # four relus, one signature
    checks.clear()
    module = parse_module(RELUS.replace("%s", "5xf32"), verify=False)
    op, e = first_verify_failure(module)  # type: ignore[misc]
    assert op.results[0].name_hint == "d"
    assert len(checks) == 2
    with pytest.raises(Exception) as xdsl:  # xDSL's own verifier is the oracle for the message
        module.verify()
    assert str(e) in str(xdsl.value) and "does not match the inferred tensor<4xf32>" in str(e)


def test_a_verifier_reading_more_than_the_signature_runs_for_every_op() -> None:
    """sgd_update checks that its first operand comes from job.variable: the same types from elsewhere fail."""
    text = """\
job.func @f(%g: tensor<4xf32>, %lr: tensor<f32>) -> tensor<4xf32> {
  %w = job.variable {name = "w", initializer = {kind = "zeros"}} : tensor<4xf32>
  job.sgd_update %w, %g, %lr : tensor<4xf32>, tensor<4xf32>, tensor<f32>
  %v = job.relu %g : (tensor<4xf32>) -> tensor<4xf32>
  job.sgd_update %v, %g, %lr : tensor<4xf32>, tensor<4xf32>, tensor<f32>
  job.return %w : tensor<4xf32>
}
"""
    with pytest.raises(IRParseError) as info:
        parse_module(text)
    assert str(info.value).startswith(
        "<string>:5:3: error: 'job.sgd_update' op job.sgd_update: operand #0 must come from job.variable"
    )
