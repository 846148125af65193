"""fuse-elementwise in the default pipelines: which kernels merge, and the fused job against PyTorch."""

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.dialects import buffer
from irflow.passes import PREDICT_PIPELINE, TRAIN_PIPELINE
from irflow.runtime.attributes import python_value


def convnet(job_type: str):
    flow.clear_default_session()

    @flow.global_function(type=job_type)
    def net(images: tp.Numpy.Placeholder((3, 2, 8, 8), dtype=flow.float)) -> tp.Numpy:
        conv = flow.layers.conv2d(images, 4, 3, padding="SAME", activation=flow.nn.relu, name="conv")
        pool = flow.nn.max_pool2d(conv, ksize=2, strides=2, padding="SAME", data_format="NCHW")
        flat = flow.reshape(pool, [3, -1])
        hidden = flow.layers.dense(flat, 5, activation=flow.nn.relu, name="dense")
        out = flow.layers.dense(hidden, 2, name="out")
        if job_type == "train":
            loss = flow.math.reduce_mean(flow.math.square(out))
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
            return loss
        return out

    return net


def kernels(job) -> list[buffer.KernelOp]:
    program = job.executable().program
    return [op for op in program.body.block.ops if isinstance(op, buffer.KernelOp)]


def test_both_pipelines_fuse_before_planning() -> None:
    assert "convert-job-to-buffer,fuse-batch-norm,fuse-elementwise,plan-memory" in TRAIN_PIPELINE
    assert "convert-job-to-buffer,fuse-elementwise,plan-memory" in PREDICT_PIPELINE


@pytest.mark.parametrize("job_type", ["predict", "train"])
def test_conv_takes_bias_and_relu_as_its_epilogue_and_dense_gets_bias_add_relu(job_type) -> None:
    ops = kernels(convnet(job_type))
    (conv,) = [op for op in ops if op.kernel.data == "conv2d"]
    assert conv.parameters()["epilogue"].data == "bias_add_relu" and len(conv.ins) == 3
    assert [op.kernel.data for op in ops].count("bias_add_relu") == 1
    assert "relu" not in [op.kernel.data for op in ops]
    assert [op.kernel.data for op in ops].count("bias_add") == 1  # the last dense: no relu to fuse
    if job_type == "train":  # the conv's relu_grad goes into the pool's gradient; the dense one stays
        (pool_grad,) = [op for op in ops if op.kernel.data == "max_pool2d_grad"]
        assert pool_grad.parameters()["epilogue"].data == "relu_grad"
        assert [op.kernel.data for op in ops].count("relu_grad") == 1


def test_fused_predict_matches_pytorch() -> None:
    torch = pytest.importorskip("torch")
    net = convnet("predict")
    x = np.random.default_rng(0).standard_normal((3, 2, 8, 8)).astype(np.float32)
    got = net(x)
    v = {k: torch.from_numpy(a.numpy()) for k, a in flow.get_all_variables().items()}
    functional = torch.nn.functional
    conv = functional.relu(functional.conv2d(torch.from_numpy(x), v["conv-weight"], v["conv-bias"], padding=1))
    pool = functional.max_pool2d(conv, 2)
    hidden = functional.relu(functional.linear(pool.reshape(3, -1), v["dense-weight"], v["dense-bias"]))
    expected = functional.linear(hidden, v["out-weight"], v["out-bias"])
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-5)


def test_dense_weight_gradients_take_their_update_as_epilogue() -> None:
    """Each dense weight's gradient matmul applies its update (OneFlow's SGD has momentum 0.9 by default); the conv's
    and the biases' updates stay apart."""
    ops = kernels(convnet("train"))
    fused = {op.ins[2].name_hint: op for op in ops if op.kernel.data == "matmul" and "epilogue" in op.parameters()}
    assert sorted(fused) == ["dense-weight", "out-weight"]
    for op in fused.values():
        assert op.parameters()["epilogue"].data == "momentum_update" and python_value(op.parameters()["transpose_a"]) is True
        assert len(op.ins) == 5 and list(op.outs) == [op.ins[2], op.ins[3]]
    updated = sorted(op.ins[0].name_hint for op in ops if op.kernel.data == "momentum_update")
    assert updated == ["conv-bias", "conv-weight", "dense-bias", "out-bias"]


def test_fused_updates_leave_no_gradient_buffer_for_the_weights() -> None:
    """The dense weights' gradients, (5, 64) and (2, 5), had allocs of their own; fused, they are gone."""
    program = convnet("train").executable().program
    shapes = [tuple(op.results[0].type.get_shape()) for op in program.body.block.ops if isinstance(op, buffer.AllocOp)]
    assert (5, 64) not in shapes and (2, 5) not in shapes


def test_the_pass_fuses_exactly_the_updates_the_matmul_kernel_applies() -> None:
    from irflow.passes import fuse_elementwise
    from irflow.runtime.kernels import linalg

    assert fuse_elementwise.UPDATES == set(linalg.UPDATES)
