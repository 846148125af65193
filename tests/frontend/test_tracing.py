"""Tracing: what IR a job function becomes, and where errors point."""

from typing import Tuple

import pytest

import irflow as flow
import irflow.typing as tp
from irflow.dialects import job
from irflow.textir import parse_module

HERE = __file__


def ops_of(fn):
    return [op for op in fn.module.walk() if isinstance(op, job.JobOp)]


def line_of(marker: str) -> int:
    """The line of this file that holds `marker` (keeps tests independent of line numbers)."""
    for i, text in enumerate(open(HERE).read().splitlines(), 1):
        if marker in text and "line_of(" not in text:
            return i
    raise AssertionError(marker)


def test_trace_records_ops_types_and_user_locations():
    @flow.global_function()
    def mlp(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        h = flow.layers.dense(x, 5, activation=flow.nn.relu, name="hidden")  # MARK-dense
        return flow.nn.softmax(h)

    names = [op.name for op in ops_of(mlp)]
    assert names == ["job.variable", "job.matmul", "job.variable", "job.bias_add", "job.relu", "job.softmax"]
    text = mlp.ir("job")
    assert '@mlp(%x: tensor<4x3xf32>' in text and '%hidden-weight = job.variable' in text
    assert 'name = "hidden-weight"' in text and "tensor<5x3xf32>" in text
    assert 'name = "hidden-bias"' in text
    assert "transpose_b = true" in text
    assert f'loc("{HERE}":{line_of("MARK-dense")}:' in text
    assert "job_type = \"predict\"" in text


def test_traced_text_parses_back():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2, 3)), y: tp.Numpy.Placeholder((2,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 4, kernel_initializer=flow.truncated_normal(0.1), name="d")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    module = parse_module(train.ir("job"))
    module.verify()


def test_column_is_that_of_the_call():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.math.exp(x)  # MARK-exp

    op = ops_of(f)[0]
    line = line_of("MARK-exp")
    source = open(HERE).read().splitlines()[line - 1]
    assert (op.location.line.data, op.location.column.data) == (line, source.index("flow.math.exp") + 1)


def test_shape_error_points_at_the_users_line():
    with pytest.raises(flow.TraceError) as info:

        @flow.global_function()
        def bad(a: tp.Numpy.Placeholder((4, 8)), b: tp.Numpy.Placeholder((4, 8))) -> tp.Numpy:
            return flow.matmul(a, b)  # MARK-matmul

    err = info.value
    assert err.location.file == HERE
    assert err.location.line == line_of("MARK-matmul")
    assert "matmul contraction mismatch" in str(err)
    assert str(err).startswith(f"{HERE}:{line_of('MARK-matmul')}:")


def test_shape_error_inside_a_helper_points_at_the_helper():
    def helper(x):
        return x + flow.constant(1.0, shape=(3,))  # MARK-helper

    with pytest.raises(flow.TraceError) as info:

        @flow.global_function()
        def bad(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            return helper(x)

    assert info.value.location.line == line_of("MARK-helper")
    assert "do not broadcast" in info.value.message


def test_op_outside_a_job_function():
    with pytest.raises(flow.TraceError, match="inside a job function") as info:
        flow.math.relu(None)
    assert info.value.location.file == HERE


def test_blob_of_another_job_is_rejected():
    kept = []

    @flow.global_function()
    def first(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        kept.append(x)
        return x

    with pytest.raises(flow.TraceError, match="belongs to job 'first'"):

        @flow.global_function()
        def second(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            return x + kept[0]


@pytest.mark.parametrize(
    "source, message",
    [
        ("def f(x) -> tp.Numpy:\n    return x", "needs a placeholder annotation"),
        ("def f(x: int) -> tp.Numpy:\n    return x", "needs a placeholder annotation"),
        ("def f(*xs: tp.Numpy.Placeholder((2,))) -> tp.Numpy:\n    return xs[0]", "cannot take *xs"),
        ("def f(**kw: tp.Numpy.Placeholder((2,))) -> tp.Numpy:\n    return 1", "cannot take **kw"),
        ("def f(x: tp.Numpy.Placeholder((2,))):\n    return 3", "expects a Blob or a list, tuple or dict"),
        ("def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:\n    return 3", "expects a Blob"),
        ("def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:\n    return (x, x)", "expects a Blob"),
        ("def f(x: tp.Numpy.Placeholder((2,))) -> Tuple[tp.Numpy, tp.Numpy]:\n    return (x,)", "a tuple of 2"),
        ("def f(x: tp.Numpy.Placeholder((2,))) -> tp.Callback:\n    return x", "tp.Callback needs the type"),
        ("def f(x: tp.Numpy.Placeholder((2,))) -> int:\n    return x", "unsupported return annotation"),
        ("def f(x: tp.Numpy.Placeholder((2,))) -> None:\n    return x", "annotated -> None"),
        ("def f(x: tp.Numpy.Placeholder((2,))) -> tp.Bundle:\n    return x", "tp.Bundle needs"),
    ],
)
def test_bad_signatures_point_at_the_def_line(tmp_path, source, message):
    path = tmp_path / "user_job.py"
    path.write_text(
        "from typing import Tuple\nimport irflow as flow\nimport irflow.typing as tp\n\n"
        "@flow.global_function()\n" + source + "\n"
    )
    with pytest.raises(flow.TraceError, match=message.replace("*", r"\*")) as info:
        exec(compile(path.read_text(), str(path), "exec"), {})
    assert info.value.location.file == str(path)
    assert info.value.location.line == 6  # the `def`, below the decorator


def test_positional_function_config_is_deprecated_but_works():
    config = flow.function_config()
    config.default_data_type(flow.double)
    with pytest.warns(DeprecationWarning, match="deprecated"):

        @flow.global_function(config)
        def f(x: tp.Numpy.Placeholder((2,), dtype=flow.double)) -> tp.Numpy:
            return x + flow.get_variable("v", shape=(2,))

    assert f.job_type == "predict"
    assert "tensor<2xf64>" in f.ir("job")


def test_function_config_rejects_unknown_options():
    config = flow.function_config()
    with pytest.raises(AttributeError, match="no setting 'enable_inplce'.*default_data_type, default_logical_view"):
        config.enable_inplce(True)
    config.default_logical_view(flow.scope.consistent_view())


def test_function_config_records_oneflow_tuning_flags_and_refuses_what_changes_results():
    config = flow.function_config()
    config.enable_inplace(True)
    config.prune_parallel_cast_ops()  # bare: True, as OneFlow's setters
    config.cudnn_buf_limit_mbyte(1024)
    config.optimizer_placement_optimization_mode("distributed_split")
    config.enable_auto_mixed_precision(False)
    assert config.recorded == {
        "enable_inplace": True, "prune_parallel_cast_ops": True, "cudnn_buf_limit_mbyte": 1024,
        "optimizer_placement_optimization_mode": "distributed_split",
    }
    with pytest.raises(ValueError, match=r"enable_auto_mixed_precision\(True\) is not supported"):
        config.enable_auto_mixed_precision(True)
    with pytest.raises(ValueError, match=r"enable_quantization_aware_training\(True\) is not supported"):
        config.enable_qat()
    with pytest.raises(ValueError, match="concurrency_width expects an int >= 1, got 0"):
        config.concurrency_width(0)
    with pytest.raises(ValueError, match="expects True or False"):
        config.enable_fuse_add_to_output("yes")


def test_bad_job_type():
    with pytest.raises(flow.TraceError, match="'train' or 'predict'"):
        flow.global_function(type="eval")


def test_placement_is_recorded_and_nests():
    config = flow.function_config()
    config.default_placement_scope(flow.scope.placement("cpu", "0:0"))

    @flow.global_function(function_config=config)
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        a = flow.math.exp(x)
        with flow.scope.placement("gpu", ["0:0-1"], hierarchy=[2]):
            b = flow.math.log(a)
        return b

    exp, log = ops_of(f)
    assert exp.placement.device_tag.data == "cpu"
    assert log.placement.device_tag.data == "gpu"
    assert [h.data for h in log.placement.hierarchy] == [2]


def test_bad_placement():
    with pytest.raises(flow.TraceError, match="unknown device tag 'tpu'"):
        flow.scope.placement("tpu", "0:0")
    with pytest.raises(flow.TraceError, match="bad device range"):
        flow.scope.placement("cpu", "zero")


def test_tuple_parameters_become_flat_block_arguments():
    @flow.global_function()
    def f(
        pair: Tuple[tp.Numpy.Placeholder((2,)), tp.Numpy.Placeholder((3,), dtype=flow.int32)],
        z: tp.ListNumpy.Placeholder((4,)),
    ) -> Tuple[tp.Numpy, tp.Numpy]:
        a, b = pair
        assert (a.shape, b.shape, b.dtype, z.shape) == ((2,), (3,), flow.int32, (4,))
        assert (a.name, b.name, z.name) == ("pair_0", "pair_1", "z")
        return a, z

    func = f.module.body.block.first_op
    assert [str(a.type) for a in func.body.block.args] == [
        "tensor<2xf32>", "tensor<3xi32>", "tensor<4xf32, #job.bounded<[0]>>"  # a list placeholder: up to 4 rows
    ]


def test_variables_are_shared_by_name_and_must_agree():
    @flow.global_function()
    def first(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        v = flow.get_variable("shared", shape=(2,), initializer=flow.ones_initializer())  # MARK-var
        w = flow.get_variable("shared", shape=(2,))  # reuse in one job: the same value
        assert v.value is w.value
        return x * v

    @flow.global_function()
    def second(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x + flow.get_variable("shared", shape=(2,))

    (var,) = [op for op in ops_of(second) if isinstance(op, job.VariableOp)]
    assert var.initializer.data["kind"].data == "constant"
    assert var.initializer.data["value"].value.data == 1.0  # the first declaration decides

    with pytest.raises(flow.TraceError, match=r"'shared' is float32 \(3,\) here, but job 'first' declared it float32 \(2,\)"):

        @flow.global_function()
        def third(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
            return x + flow.get_variable("shared", shape=(3,))


def test_a_failed_trace_declares_nothing():
    with pytest.raises(flow.TraceError):

        @flow.global_function()
        def broken(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            v = flow.get_variable("w", shape=(5,))
            return flow.matmul(x, v)

    @flow.global_function()
    def fixed(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * flow.get_variable("w", shape=(2,))


def test_default_layer_names_count_per_job():
    def net(x):
        return flow.layers.dense(flow.layers.dense(x, 3), 2)

    @flow.global_function()
    def a(x: tp.Numpy.Placeholder((1, 4))) -> tp.Numpy:
        return net(x)

    @flow.global_function()
    def b(x: tp.Numpy.Placeholder((1, 4))) -> tp.Numpy:
        return net(x)

    names = lambda fn: [op.var_name.data for op in ops_of(fn) if isinstance(op, job.VariableOp)]  # noqa: E731
    assert names(a) == names(b) == ["Dense_0-weight", "Dense_0-bias", "Dense_1-weight", "Dense_1-bias"]


def test_dropout_is_a_mask_in_train_jobs_and_identity_in_predict_jobs():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,))
        y = flow.nn.dropout(x * w, rate=0.5)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(flow.math.reduce_sum(y))
        return y

    @flow.global_function()
    def predict(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.nn.dropout(x, rate=0.5)

    assert "job.dropout_mask" in train.ir("job") and "rate = 5.0" in train.ir("job")
    assert "dropout" not in predict.ir("job")
    with pytest.raises(flow.TraceError, match="noise_shape is not supported"):

        @flow.global_function(type="train")
        def noisy(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
            return flow.nn.dropout(x, rate=0.5, noise_shape=[2, 1])


def test_minimize_outside_a_train_job():
    with pytest.raises(flow.TraceError, match="only a job with @flow.global_function\\(type='train'\\)"):

        @flow.global_function(type="predict")
        def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(x)
            return x


def test_optimizer_dictionary_schema():
    @flow.global_function(type="train")
    def f(x: tp.Numpy.Placeholder((2,))) -> None:
        loss = flow.math.reduce_sum(x * flow.get_variable("w", shape=(2,)))
        scheduler = flow.optimizer.CosineScheduler(0.5, 100, warmup=flow.optimizer.warmup.linear(10, 0.1))
        flow.optimizer.AdamW(
            scheduler, weight_decay=0.01, grad_clipping=flow.optimizer.grad_clipping.by_global_norm(1.0)
        ).minimize(loss)

    (minimize,) = [op for op in ops_of(f) if isinstance(op, job.MinimizeOp)]
    opt = minimize.optimizer.data
    assert opt["kind"].data == "adamw"
    assert {k for k in opt} == {
        "kind", "momentum", "beta1", "beta2", "epsilon", "do_bias_correction", "weight_decay", "decay_rate", "centered",
        "lars_coefficient", "clip_norm", "lr", "warmup",
    }
    assert opt["weight_decay"].value.data == 0.01 and opt["clip_norm"].value.data == 1.0
    assert opt["lr"].data["kind"].data == "cosine" and opt["lr"].data["steps"].value.data == 100
    assert opt["warmup"].data["kind"].data == "linear" and opt["warmup"].data["multiplier"].value.data == 0.1


def test_piecewise_scheduler_checks_its_lengths():
    with pytest.raises(ValueError, match="one more value than boundaries"):
        flow.optimizer.PiecewiseConstantScheduler([10, 20], [0.1, 0.01])
    spec = flow.optimizer.PiecewiseConstantScheduler([10], [1, 0.5]).spec
    assert spec == {"kind": "piecewise_constant", "boundaries": [10], "values": [1.0, 0.5]}


def test_blob_repr_and_operators():
    seen = {}

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        seen["repr"] = repr(x)
        y = -x + 1 - 2 * x / 3.0
        seen["cmp"] = (x < 0.5).dtype
        seen["matmul"] = (x @ flow.transpose(x)).shape
        with pytest.raises(flow.TraceError, match="truth value"):
            bool(x)
        return y ** 2

    assert seen == {"repr": "Blob(name='x', shape=(2, 3), dtype=oneflow.float32)", "cmp": flow.int8, "matmul": (2, 2)}


def test_reshape_and_slice_arguments():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
        assert flow.reshape(x, [-1, 4]).shape == (6, 4)
        assert flow.slice(x, [None, 1, -2], [None, -1, 2]).shape == (2, 2, 2)
        with pytest.raises(flow.TraceError, match="cannot reshape"):
            flow.reshape(x, [5, -1])
        with pytest.raises(flow.TraceError, match="begin 3 is out of range"):
            flow.slice(x, [0, 3, 0], [1, 1, 1])
        return x

    assert f.job_name == "f"


def test_duplicate_job_names_get_suffixes():
    def make():
        @flow.global_function()
        def job_fn(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
            return x

        return job_fn

    assert [make().job_name for _ in range(3)] == ["job_fn", "job_fn_1", "job_fn_2"]


def test_string_annotations_resolve():
    namespace = {}
    exec(
        "from __future__ import annotations\nimport irflow as flow\nimport irflow.typing as tp\n"
        "@flow.global_function()\ndef f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:\n    return x\n",
        namespace,
    )
    assert "tensor<2xf32>" in namespace["f"].ir("job")


def test_watch_handler_needs_an_annotation():
    with pytest.raises(flow.TraceError, match="annotate the handler's argument"):

        @flow.global_function()
        def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            flow.watch(x, lambda v: None)
            return x
