"""The distributed API at trace time: hints, placements and views as the traced job IR records them."""

import numpy as np
import pytest
from xdsl.dialects.builtin import StringAttr

import irflow as flow
import irflow.typing as tp
from irflow.dialects import job
from irflow.dialects.bounds import with_dynamic
from irflow.dialects.sbp import NdSbpAttr, PlacementAttr, SbpAttr
from irflow.target import decide_target
from irflow.textir import parse_module, print_module

HERE = __file__
S0, S1, B, P = (NdSbpAttr([c]) for c in (SbpAttr("split", 0), SbpAttr("split", 1), SbpAttr("broadcast"), SbpAttr("partial_sum")))


def line_of(marker: str) -> int:
    for i, text in enumerate(open(HERE).read().splitlines(), 1):
        if marker in text and "line_of(" not in text:
            return i
    raise AssertionError(marker)


def func_of(fn) -> job.FuncOp:
    return next(op for op in fn.module.walk() if isinstance(op, job.FuncOp))


def variables(fn) -> dict[str, job.VariableOp]:
    return {op.var_name.data: op for op in fn.module.walk() if isinstance(op, job.VariableOp)}


def hinted(op) -> NdSbpAttr | None:
    """The op's SBP if it is the user's hint (and only then)."""
    if op.attributes.get("sbp_origin") != StringAttr("hint"):
        assert op.properties.get("sbp") is None
        return None
    return op.properties["sbp"]


def test_one_device_jobs_carry_no_distribution():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.layers.dense(x, 2, name="d")

    func = func_of(f)
    assert not {"placement", "arg_sbp", "view"} & set(func.attributes)
    assert all(hinted(op) is None for op in f.module.walk() if isinstance(op, job.JobOp))


def test_device_count_gives_the_placement_and_inputs_default_to_split0():
    flow.config.cpu_device_num(4)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((8, 3)), s: tp.Numpy.Placeholder(())) -> tp.Numpy:
        return flow.layers.dense(x, 2, name="d") * s

    func = func_of(f)
    assert func.attributes["placement"] == PlacementAttr("cpu", ["0:0-3"])
    assert list(func.attributes["arg_sbp"]) == [S0, B]  # a rank-0 input can only be whole
    assert "view" not in func.attributes
    target, _ = decide_target(f.module)
    assert (target.device, target.num_devices, target.hierarchy) == ("cpu", 4, (4,))


def test_clearing_the_session_resets_the_device_count():
    flow.config.cpu_device_num(3)
    flow.clear_default_session()

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return x + 1.0

    assert "placement" not in func_of(f).attributes


def test_bad_device_counts():
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match=r"cpu_device_num expects an int >= 1"):
            flow.config.cpu_device_num(bad)


def test_the_default_placement_spans_every_machine():
    """OneFlow's default placement is `cpu_device_num` devices on each of `machine_num` machines."""
    flow.config.machine_num(2)
    flow.config.cpu_device_num(2)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((8, 4))) -> tp.Numpy:
        return flow.math.reduce_sum(x * x, axis=0)

    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    np.testing.assert_allclose(f(x), (x.astype(np.float64) ** 2).sum(axis=0), rtol=1e-6)
    assert func_of(f).attributes["placement"] == PlacementAttr("cpu", ["0:0-1", "1:0-1"])
    assert decide_target(f.module)[0].num_devices == 4


def test_placement_scope_wins_over_the_device_count_and_keeps_its_hierarchy():
    flow.config.cpu_device_num(2)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((8, 4))) -> tp.Numpy:
        with flow.scope.placement("cpu", "0:0-3", hierarchy=[2, 2]):
            return flow.math.relu(x).with_distribute([flow.distribute.split(0), flow.distribute.split(1)])

    func = func_of(f)
    assert func.attributes["placement"] == PlacementAttr("cpu", ["0:0-3"], [2, 2])
    relu = next(op for op in f.module.walk() if isinstance(op, job.ReluOp))
    assert hinted(relu) == NdSbpAttr([SbpAttr("split", 0), SbpAttr("split", 1)])
    assert decide_target(f.module)[0].hierarchy == (2, 2)


def test_one_distribute_on_a_2d_hierarchy_applies_to_every_axis():
    config = flow.function_config()
    config.default_placement_scope(flow.scope.placement("cpu", ["0:0-1", "1:0-1"], hierarchy=[2, 2]))

    @flow.global_function(function_config=config)
    def f(x: tp.Numpy.Placeholder((8, 4))) -> tp.Numpy:
        return flow.math.relu(x.with_distribute(flow.distribute.broadcast()))

    func = func_of(f)
    assert list(func.attributes["arg_sbp"]) == [NdSbpAttr([SbpAttr("broadcast")] * 2)]
    assert func.attributes["placement"].devices == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_different_scopes_join_into_one_job_placement():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((8,))) -> tp.Numpy:
        with flow.scope.placement("cpu", "0:0-1"):
            a = flow.math.exp(x)
        with flow.scope.placement("cpu", "0:2-3"):
            return flow.math.log(a)

    assert func_of(f).attributes["placement"] == PlacementAttr("cpu", ["0:0", "0:1", "0:2", "0:3"])


def test_variable_and_dense_hints():
    flow.config.cpu_device_num(2)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
        h = flow.layers.dense(x, 8, model_distribute=flow.distribute.split(0), name="rows")
        h = flow.layers.dense(h, 6, model_distribute=flow.distribute.split(1), name="cols")
        w = flow.get_variable("w", shape=(6, 6), distribute=flow.distribute.broadcast())
        return flow.matmul(h, w)

    found = variables(f)
    assert hinted(found["rows-weight"]) == S0 and hinted(found["rows-bias"]) == S0
    assert hinted(found["cols-weight"]) == S1 and hinted(found["cols-bias"]) is None
    assert hinted(found["w"]) == B
    # The hints are printed in the IR and parse back to the same module.
    text = f.ir("job")
    assert 'sbp_origin = "hint"' in text and "#job.nd_sbp<[split(1)]>" in text
    assert print_module(parse_module(text), debuginfo=True) == text


def test_the_first_declaration_of_a_variable_decides_its_distribute():
    flow.config.cpu_device_num(2)

    @flow.global_function()
    def train(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
        return flow.layers.dense(x, 8, model_distribute=flow.distribute.split(0), name="d")

    @flow.global_function()
    def evaluate(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
        return flow.layers.dense(x, 8, name="d")

    assert hinted(variables(evaluate)["d-weight"]) == S0
    with pytest.raises(flow.TraceError, match=r"'d-weight' is given distribute=flow.distribute.broadcast\(\)") as err:

        @flow.global_function()
        def other(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
            return flow.layers.dense(x, 8, model_distribute=flow.distribute.broadcast(), name="d")  # MARK-other

    assert err.value.location.line == line_of("MARK-other")


def test_input_hints_become_arg_sbp():
    flow.config.cpu_device_num(2)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((4, 6)), y: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
        return x.with_split_distribute(1) + y.with_broadcast_distribute()

    assert list(func_of(f).attributes["arg_sbp"]) == [S1, B]


def test_bad_hints_are_located_errors():
    flow.config.cpu_device_num(2)
    cases = {
        "axis": (lambda x: x.with_distribute(flow.distribute.split(2)), "cannot split axis 2 of a value of shape"),
        "kind": (lambda x: x.with_distribute("S(0)"), "distribute must be flow.distribute.split"),
        "count": (
            lambda x: x.with_distribute([flow.distribute.split(0)] * 2),
            "2 distributes given for a placement with 1 hierarchy axes",
        ),
        "twice": (
            lambda x: flow.math.relu(x).with_split_distribute(0).with_broadcast_distribute(),
            r"already has the distribute \[split\(0\)\]; one value has one SBP: use flow.parallel_cast",
        ),
    }
    for name, (make, message) in cases.items():
        with pytest.raises(flow.TraceError, match=message) as err:

            @flow.global_function()
            def f(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
                return make(x)

        assert err.value.location.file == HERE, name  # the user's line: where the hint is written
    with pytest.raises(flow.TraceError, match="axis must be a non-negative int"):
        flow.distribute.split(-1)


def test_mirrored_view_traces_the_devices_together():
    flow.config.cpu_device_num(3)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def f(x: tp.ListNumpy.Placeholder((2, 5))) -> tp.ListNumpy:
        assert x.shape == (6, 5)  # the job sees the three devices' arrays one after another, at their bound
        return flow.math.relu(x)

    func = func_of(f)
    assert func.attributes["view"] == StringAttr("mirrored")
    assert list(func.attributes["arg_sbp"]) == [S0]
    # each device's sizes are its own, within the placeholder's (2, 5) (docs/dynamic.md)
    assert [a.type for a in func.body.block.args] == [with_dynamic(job.tensor((6, 5), job.f32), [0, 1])]


def test_devices_configured_after_the_definition_count_when_the_session_starts():
    """As in OneFlow's programs: define the job, then set the device count, then call."""
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def f(x: tp.ListNumpy.Placeholder((2, 5))) -> tp.ListNumpy:
        return flow.math.relu(x)

    flow.config.cpu_device_num(2)
    pieces = [np.full((2, 5), -1.0, np.float32), np.arange(10, dtype=np.float32).reshape(2, 5)]
    out = f(pieces)
    assert len(out) == 2
    np.testing.assert_array_equal(out[0], np.zeros((2, 5), np.float32))
    np.testing.assert_array_equal(out[1], pieces[1])
    assert len(func_of(f).attributes["placement"].devices) == 2


def test_mirrored_max_and_min_over_no_rows_at_all_are_their_identities():
    """Every device feeding no rows: a max over the rows is -inf and a min +inf, as TensorFlow's reduce_max over
    an empty axis (numpy's raised from the kernel); a device with rows of its own still decides alone."""
    flow.config.cpu_device_num(2)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def f(x: tp.ListNumpy.Placeholder((3, 2))) -> tp.Numpy:
        return flow.concat([flow.math.reduce_max(x, axis=[0], keepdims=True),
                            flow.math.reduce_min(x, axis=[0], keepdims=True)], axis=0)  # fmt: skip

    none = np.zeros((0, 2), np.float32)
    np.testing.assert_array_equal(f([none, none]), [[-np.inf, -np.inf], [np.inf, np.inf]])
    rows = np.array([[1.0, -2.0], [3.0, 5.0]], np.float32)
    np.testing.assert_array_equal(f([none, rows]), [rows.max(axis=0), rows.min(axis=0)])


@pytest.mark.parametrize("dtype", [flow.int32, flow.int64])
def test_mirrored_integer_min_and_max_over_no_rows_at_all_are_the_types_extremes(dtype):
    """Integers have no inf: a min over no rows is the type's maximum, a max its minimum (TensorFlow's)."""
    flow.config.cpu_device_num(3)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def f(x: tp.ListNumpy.Placeholder((3, 2), dtype=dtype)) -> tp.Numpy:
        return flow.concat([flow.math.reduce_min(x, axis=[0], keepdims=True),
                            flow.math.reduce_max(x, axis=[0], keepdims=True)], axis=0)  # fmt: skip

    info = np.iinfo(dtype.np_dtype)
    none = np.zeros((0, 2), dtype.np_dtype)
    np.testing.assert_array_equal(f([none] * 3), [[info.max, info.max], [info.min, info.min]])
    rows = np.array([[7, info.min], [-3, 5]], dtype.np_dtype)
    more = np.array([[info.max, 6]], dtype.np_dtype)
    both = np.concatenate([rows, more])
    np.testing.assert_array_equal(f([rows, none, more]), [both.min(axis=0), both.max(axis=0)])


def test_mirrored_argmax_over_no_rows_at_all_is_an_error_at_its_line():
    flow.config.cpu_device_num(2)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def f(x: tp.ListNumpy.Placeholder((3,))) -> tp.Numpy:
        return flow.reshape(flow.math.argmax(x), [1])  # MARK-argmax

    np.testing.assert_array_equal(f([np.zeros(0, np.float32), np.array([1.0, 3.0, 2.0], np.float32)]), [1])
    with pytest.raises(flow.ExecutionError, match="argmax on device 0 of 2 .*has no entries") as err:
        f([np.zeros(0, np.float32)] * 2)
    assert err.value.location.line == line_of("MARK-argmax")


def test_mirrored_softmax_over_the_rows_of_no_device_is_empty():
    flow.config.cpu_device_num(2)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def f(x: tp.ListNumpy.Placeholder((3,))) -> tp.Numpy:  # over every device's rows, gathered
        y = flow.nn.softmax(x, axis=0) * x + flow.nn.log_softmax(x, axis=0)
        return flow.math.reduce_sum(y, axis=[0], keepdims=True)

    np.testing.assert_array_equal(f([np.zeros(0, np.float32)] * 2), [0.0])
    x = np.array([1.0, 3.0], np.float32)
    soft = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
    np.testing.assert_allclose(f([np.zeros(0, np.float32), x]), [(soft * x + np.log(soft)).sum()], rtol=1e-6)


def test_mirrored_view_errors():
    flow.config.cpu_device_num(2)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())
    with pytest.raises(flow.TraceError, match="use tp.ListNumpy.Placeholder"):

        @flow.global_function(function_config=config)
        def numpy_input(x: tp.Numpy.Placeholder((2, 5))) -> tp.ListNumpy:
            return x

    with pytest.raises(flow.TraceError, match="a rank-0 output has no such split"):

        @flow.global_function(function_config=config)
        def scalar_output(x: tp.ListNumpy.Placeholder((2, 5))) -> tp.ListNumpy:
            return flow.math.reduce_sum(x)

    with pytest.raises(flow.TraceError, match="every input is split along axis 0"):

        @flow.global_function(function_config=config)
        def hinted_input(x: tp.ListNumpy.Placeholder((2, 5))) -> tp.ListNumpy:
            return x.with_broadcast_distribute() + 1.0

    with pytest.raises(flow.TraceError, match=r"laid out for the 2 device\(s\)"):

        @flow.global_function(function_config=config)
        def moved(x: tp.ListNumpy.Placeholder((2, 5))) -> tp.ListNumpy:
            with flow.scope.placement("cpu", "0:0-3"):
                return x + 1.0


def test_one_device_mirrored_view_is_the_consistent_one():
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def f(x: tp.Numpy.Placeholder((2, 5))) -> tp.Numpy:
        return x + 1.0

    assert not {"placement", "arg_sbp", "view"} & set(func_of(f).attributes)


def test_gpu_device_count_falls_back_to_as_many_cpu_devices():
    from irflow.runtime.backend import gpu_module

    if gpu_module() is not None:
        pytest.skip("a GPU is usable here")
    flow.config.gpu_device_num(2)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return x + 1.0

    assert func_of(f).attributes["placement"] == PlacementAttr("gpu", ["0:0-1"])
    with pytest.warns(RuntimeWarning, match="no usable GPU"):
        target, warned = decide_target(f.module)
    assert warned and (target.device, target.num_devices) == ("cpu", 2)
    assert target.placement == PlacementAttr("cpu", ["0:0-1"])


def test_parallel_cast_traces_a_hinted_boxing():
    flow.config.cpu_device_num(2)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
        y = flow.parallel_cast(flow.math.relu(x), distribute=flow.distribute.broadcast())  # MARK-cast
        return y * 2.0

    (boxing,) = [op for op in f.module.walk() if isinstance(op, job.BoxingOp)]
    assert hinted(boxing) == B and boxing.src_sbp is None  # sbp-infer fills the source in
    assert boxing.location.line.data == line_of("MARK-cast")
    for bad, message in (
        ({}, "distribute or gradient_distribute is required"),
        ({"distribute": flow.distribute.broadcast(), "gradient_distribute": flow.distribute.split(2)},
         "gradient_distribute"),
    ):
        with pytest.raises(flow.TraceError, match=message):

            @flow.global_function()
            def g(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
                return flow.parallel_cast(x, **bad)


def test_with_gradient_distribute_checks_the_hint_and_returns_the_blob():
    """OneFlow's blob.with_gradient_distribute(d) (parallel_cast with a gradient_distribute alone): the
    forward value unchanged, no boxing; a distribute that does not fit is a TraceError at its line."""
    flow.config.cpu_device_num(2)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
        y = flow.math.relu(x)
        assert y.with_gradient_distribute(flow.distribute.split(1)) is y
        assert flow.parallel_cast(y, gradient_distribute=flow.distribute.broadcast()) is y
        return y * 2.0

    assert not [op for op in f.module.walk() if isinstance(op, job.BoxingOp)]
    x = np.arange(24.0, dtype=np.float32).reshape(4, 6) - 12.0
    np.testing.assert_allclose(f(x), np.maximum(x, 0.0) * 2.0)
    with pytest.raises(flow.TraceError, match="with_gradient_distribute: .*cannot split axis 2") as e:

        @flow.global_function()
        def g(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
            return x.with_gradient_distribute(flow.distribute.split(2))  # MARK-grad

    assert e.value.location.line == line_of("MARK-grad")


def test_parallel_cast_gradient_distribute_trains_as_pytorch():
    """Wide&Deep's embeddings: tables split over the devices, parallel_casts with a gradient_distribute; the
    hint only places the gradient, so two devices train as torch.optim.SGD does on one."""
    flow.config.cpu_device_num(2)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    wide0, deep0 = rng.normal(size=(6, 1)).astype(np.float32), rng.normal(size=(6, 4)).astype(np.float32)
    ids = rng.integers(0, 6, (4, 2)).astype(np.int32)
    labels = rng.integers(0, 2, (4, 1)).astype(np.int32)

    @flow.global_function(type="train")
    def train(i: tp.Numpy.Placeholder((4, 2), dtype=flow.int32),
              y: tp.Numpy.Placeholder((4, 1), dtype=flow.int32)) -> tp.Numpy:
        i = flow.parallel_cast(i, distribute=flow.distribute.broadcast())
        wide = flow.get_variable("wide_embedding", shape=(6, 1), distribute=flow.distribute.split(0))
        deep = flow.get_variable("deep_embedding", shape=(6, 4), distribute=flow.distribute.split(1))
        w = flow.math.reduce_sum(flow.reshape(flow.gather(params=wide, indices=i), (4, 2)), axis=[1], keepdims=True)
        w = flow.parallel_cast(w, distribute=flow.distribute.split(0), gradient_distribute=flow.distribute.broadcast())
        d = flow.parallel_cast(flow.gather(params=deep, indices=i), distribute=flow.distribute.split(0),
                               gradient_distribute=flow.distribute.split(2))
        logits = w + flow.math.reduce_sum(flow.reshape(d, (4, 8)), axis=[1], keepdims=True)
        loss = flow.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5]), momentum=0).minimize(loss)
        return flow.math.reduce_mean(loss)

    flow.load_variables({"wide_embedding": wide0, "deep_embedding": deep0})
    wide, deep = torch.tensor(wide0, requires_grad=True), torch.tensor(deep0, requires_grad=True)
    opt = torch.optim.SGD([wide, deep], lr=0.5)
    index = torch.tensor(ids, dtype=torch.int64)
    for _ in range(3):
        loss = train(ids, labels)
        opt.zero_grad()
        logits = wide[index].reshape(4, 2).sum(1, keepdim=True) + deep[index].reshape(4, 8).sum(1, keepdim=True)
        expected = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.tensor(labels, dtype=torch.float32))
        expected.backward()
        opt.step()
        np.testing.assert_allclose(loss, expected.item(), rtol=1e-5)
    values = flow.get_all_variables()
    np.testing.assert_allclose(values["wide_embedding"].numpy(), wide.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values["deep_embedding"].numpy(), deep.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_input_hints_fit_the_job_placement_when_every_op_is_scoped():
    """The placeholders are defined on a 2x2 mesh but every op runs on 0:0-1, which becomes the job's placement:
    one distribute is fitted to it (it was [broadcast, broadcast]: an unlocated CompileError in sbp-infer), and a
    list for the 2x2 mesh is a located error."""
    config = flow.function_config()
    config.default_data_type(flow.float64)
    config.default_placement_scope(flow.scope.placement("cpu", "0:0-3", hierarchy=[2, 2]))

    @flow.global_function(function_config=config)
    def f(x: tp.Numpy.Placeholder((4,), dtype=flow.float64)) -> tp.Numpy:
        x = x.with_distribute(flow.distribute.broadcast())
        with flow.scope.placement("cpu", "0:0-1"):
            return flow.math.relu(x)

    assert func_of(f).attributes["placement"] == PlacementAttr("cpu", ["0:0-1"])
    assert list(func_of(f).attributes["arg_sbp"]) == [B]
    np.testing.assert_array_equal(f(np.array([-1.0, 0.0, 1.0, 2.0])), [0.0, 0.0, 1.0, 2.0])

    with pytest.raises(flow.TraceError, match=r"2 distributes given for a placement with 1 hierarchy axes") as err:

        @flow.global_function(function_config=config)
        def g(x: tp.Numpy.Placeholder((4,), dtype=flow.float64)) -> tp.Numpy:
            x = x.with_distribute([flow.distribute.broadcast(), flow.distribute.split(0)])  # MARK-list
            with flow.scope.placement("cpu", "0:0-1"):
                return flow.math.relu(x)

    assert (err.value.location.file, err.value.location.line) == (HERE, line_of("MARK-list"))


def test_a_scope_covering_every_device_is_the_job_placement_whatever_comes_first():
    """An op on a part of a 2x2 mesh traced before the ops on all of it made the job a joined 1-D placement
    (devices compared in order: 1, 2, 3, 0 is not 0, 1, 2, 3), so a 2-D hint on an input failed in sbp-infer."""
    config = flow.function_config()
    config.default_data_type(flow.float64)
    config.default_placement_scope(flow.scope.placement("cpu", "0:0-3", hierarchy=[2, 2]))

    @flow.global_function(function_config=config)
    def f(x: tp.Numpy.Placeholder((4, 4), dtype=flow.float64)) -> tp.Numpy:
        x = x.with_distribute([flow.distribute.broadcast(), flow.distribute.split(1)])
        with flow.scope.placement("cpu", "0:1-3"):
            y = flow.math.relu(x)
        return flow.math.tanh(y)

    assert func_of(f).attributes["placement"] == PlacementAttr("cpu", ["0:0-3"], [2, 2])
    x = np.arange(16.0).reshape(4, 4) - 8
    np.testing.assert_allclose(f(x), np.tanh(np.maximum(x, 0)))
