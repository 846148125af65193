"""The compiler verifies through irflow.textir.verification after every pass, as irflow-opt does."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.passes import ModulePass

import irflow.compiler as compile_module
from irflow.errors import CompileError
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
