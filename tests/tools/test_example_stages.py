"""Every stage of every example job (MLP and LeNet, train and predict) reads back through irflow-opt.

The jobs are the example scripts' models (examples/models.py) at a small
batch; each stage is written as `IRFLOW_DUMP_IR` would write it and checked
with `irflow-opt --verify-roundtrip`, from its custom and its generic text.
"""

from __future__ import annotations

import pathlib
import sys

import pytest

import irflow as flow
import irflow.typing as tp
from irflow.compiler import pipeline_for
from irflow.target import Target
from irflow.textir import parse_module, print_module
from irflow.tools.opt import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
BATCH = 2
IMAGES = tp.Numpy.Placeholder((BATCH, 1, 28, 28), dtype=flow.float)
LABELS = tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)


def _models():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import models
    finally:
        sys.path.remove(str(ROOT / "examples"))
    return models


def build(model: str, job_type: str):
    """The example job `model` ("mlp" or "lenet") of `job_type`, traced in a fresh session."""
    models = _models()
    flow.clear_default_session()
    net = models.lenet if model == "lenet" else models.mlp

    if job_type == "train":

        @flow.global_function(type="train")
        def train_job(images: IMAGES, labels: LABELS) -> tp.Numpy:
            logits = net(images, train=True) if model == "lenet" else net(images)
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
            return loss

        return train_job

    @flow.global_function(type="predict")
    def eval_job(images: IMAGES) -> tp.Numpy:
        return net(images)

    return eval_job


JOBS = [("mlp", "predict"), ("mlp", "train"), ("lenet", "predict"), ("lenet", "train")]


@pytest.fixture(scope="module", params=JOBS, ids=["-".join(j) for j in JOBS])
def stages(request) -> dict[str, str]:
    job = build(*request.param)
    exe = job.executable()
    return {stage: exe.ir(stage) for stage in exe.stages}


def test_every_stage_round_trips_through_irflow_opt(stages, tmp_path, capsys) -> None:
    assert {"job", "convert-job-to-buffer", "plan-memory", "buffer"} <= stages.keys()
    for i, (stage, text) in enumerate(stages.items()):
        custom = tmp_path / f"{i:02d}.{stage}.mlir"
        custom.write_text(text)
        generic = tmp_path / f"{i:02d}.{stage}.generic.mlir"
        generic.write_text(print_module(parse_module(text), generic=True, debuginfo=True))
        for path in (custom, generic):
            assert main([str(path), "--verify-roundtrip"]) == 0, capsys.readouterr().err
            capsys.readouterr()


def test_irflow_opt_prints_what_the_compiler_prints(stages, tmp_path, capsys) -> None:
    """The same pipeline run by irflow-opt on the job stage gives the compiler's buffer stage, byte for byte."""
    job_text = stages["job"]
    module = parse_module(job_text)
    (func,) = [op for op in module.walk() if op.name == "job.func"]
    path = tmp_path / "job.mlir"
    path.write_text(job_text)
    assert main([str(path), "-p", pipeline_for(func, Target()), "--print-debuginfo"]) == 0
    assert capsys.readouterr().out == stages["buffer"]


def test_pooling_parameters_do_not_collide_with_the_kernel_name(stages) -> None:
    text = stages["buffer"]
    module = parse_module(text)
    kernels = [op for op in module.walk() if op.name == "buffer.kernel"]
    for op in kernels:
        if op.kernel.data.startswith(("max_pool2d", "avg_pool2d")):
            assert list(op.parameters()["kernel"].get_values()) == [2, 2]
    assert print_module(module, debuginfo=True) == text


def test_values_carry_the_names_users_gave(stages) -> None:
    """Placeholders, variables and named layers read as %images, %dense1-weight, %softmax_loss, not %15."""
    job = stages["job"]
    for name in ("%images", "%dense1-weight", "%dense2-bias"):
        assert f"{name} " in job or f"{name}:" in job
    if "%labels" in job:
        assert "%softmax_loss = job.sparse_softmax_cross_entropy" in job


def test_names_in_any_script_print_as_ir_that_reads_back(tmp_path, monkeypatch, capsys) -> None:
    """A job, variable or layer named outside ASCII: the names stay in its strings, every dumped stage reads back.

    Its values print as numbers: `%w权重` would be no MLIR value name (xDSL's own check takes it).
    """
    flow.clear_default_session()
    monkeypatch.setenv("IRFLOW_DUMP_IR", str(tmp_path))

    @flow.global_function(type="train")
    def 训练(images: IMAGES, w٣: tp.Numpy.Placeholder((784, 10), dtype=flow.float)) -> tp.Numpy:
        weight = flow.get_variable(name="权重", shape=(784, 10), dtype=flow.float, initializer=flow.zeros_initializer())
        bias = flow.get_variable(name="b偏置", shape=(10,), dtype=flow.float, initializer=flow.zeros_initializer())
        flat = flow.reshape(images, (BATCH, 784), name="flat")
        logits = flow.nn.bias_add(flow.matmul(flat, weight + w٣, name="y名"), bias)
        loss = flow.math.reduce_mean(logits, name="loss")
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    job_text = 训练.ir()
    assert job_text.isascii() and "%flat = job.reshape" in job_text and "%loss = job.reduce_mean" in job_text
    variables = [op.var_name.data for op in parse_module(job_text).walk() if op.name == "job.variable"]
    assert sorted(variables) == ["b偏置", "权重"]
    assert '@"\\E8\\AE\\AD\\E7\\BB\\83"' in job_text  # the job's name, 训练, as MLIR escapes it
    stages = 训练.executable().stages  # compiling writes each stage to $IRFLOW_DUMP_IR
    dumped = sorted(tmp_path.glob("*.mlir"))
    assert len(dumped) == len(stages) > 5
    for path in dumped:
        assert main([str(path), "--verify-roundtrip"]) == 0, capsys.readouterr().err
        capsys.readouterr()
