"""The executor against straightforward numpy, its allocation discipline, and backend dispatch."""

import tracemalloc
import types

import numpy as np
import pytest

from irflow.errors import CompileError
from irflow.compiler import compile_job
from irflow.runtime import VariableStore
from irflow.runtime import backend
from irflow.target import Target


def reference_mlp(x, store):
    h = np.maximum(x @ store["d1-weight"].T + store["d1-bias"], 0)
    o = h @ store["d2-weight"].T
    e = np.exp(o - o.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True), o.argmax(1)


def test_predict_matches_numpy(mlp_module):
    store = VariableStore(seed=3)
    exe = compile_job(mlp_module, "mlp", store)
    x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    probs, labels = exe([x])
    ref_probs, ref_labels = reference_mlp(x, store)
    np.testing.assert_allclose(probs, ref_probs, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(labels, ref_labels)
    assert exe.input_types == [((8, 16), np.dtype(np.float32))]
    assert exe.output_types == [((8, 4), np.dtype(np.float32)), ((8,), np.dtype(np.int64))]


def test_repeated_calls_see_new_inputs_and_return_fresh_arrays(mlp_module):
    exe = compile_job(mlp_module, "mlp", VariableStore())
    rng = np.random.default_rng(1)
    x1, x2 = (rng.standard_normal((8, 16)).astype(np.float32) for _ in range(2))
    first = exe([x1])[0]
    kept = first.copy()
    second = exe([x2])[0]
    np.testing.assert_array_equal(first, kept)  # results are not views of the arena
    assert not np.allclose(first, second)


def test_steady_state_allocates_only_results(mlp_module):
    exe = compile_job(mlp_module, "mlp", VariableStore())
    x = np.ones((8, 16), np.float32)
    exe([x])
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        results = exe([x])
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename") if s.size_diff > 0)
    result_bytes = sum(r.nbytes for r in results)
    assert grown <= result_bytes + 4096


def test_variables_are_created_once_and_shared(mlp_module):
    store = VariableStore(seed=0)
    compile_job(mlp_module, "mlp", store)
    w = store["d1-weight"]
    compile_job(mlp_module, "mlp", store)
    np.testing.assert_array_equal(store["d1-weight"], w)
    assert sorted(store.names()) == ["d1-bias", "d1-weight", "d2-weight"]
    np.testing.assert_array_equal(store["d1-bias"], np.full(32, 0.1, np.float32))


def test_same_seed_same_initial_values(mlp_module):
    a, b, c = VariableStore(seed=7), VariableStore(seed=7), VariableStore(seed=8)
    for s in (a, b, c):
        compile_job(mlp_module, "mlp", s)
    np.testing.assert_array_equal(a["d2-weight"], b["d2-weight"])
    assert not np.array_equal(a["d2-weight"], c["d2-weight"])


def test_load_is_all_or_nothing(mlp_module):
    store = VariableStore()
    compile_job(mlp_module, "mlp", store)
    before = store.snapshot()
    with pytest.raises(ValueError, match="d2-weight"):
        store.load({"d1-bias": np.zeros(32, np.float32), "d2-weight": np.zeros((3, 3), np.float32)})
    for name, value in before.items():
        np.testing.assert_array_equal(store[name], value)


def test_load_updates_what_executables_see(mlp_module):
    store = VariableStore()
    exe = compile_job(mlp_module, "mlp", store)
    store.load({"d2-weight": np.zeros((4, 32), np.float32)})
    probs, _ = exe([np.ones((8, 16), np.float32)])
    np.testing.assert_allclose(probs, 0.25)


def test_unknown_job_is_a_clear_error(mlp_module):
    with pytest.raises(CompileError, match="no job 'nope'.*mlp"):
        compile_job(mlp_module, "nope", VariableStore())


def test_stages_are_made_again_on_demand_and_end_where_compiling_did(mlp_module):
    from irflow.textir import print_module

    exe = compile_job(mlp_module, "mlp", VariableStore())
    assert "stages" not in vars(exe)  # compiling kept none
    assert list(exe.stages)[0] == "job" and "buffer" in exe.stages
    assert "job.matmul" in exe.ir("job")
    buffer_text = exe.ir("buffer")
    assert "buffer.arena" in buffer_text and "job." not in buffer_text.replace("job_type", "")
    assert buffer_text == print_module(exe.program.parent_op(), debuginfo=True)  # the program that runs


def fake_cupy():
    """A stand-in for cupy backed by numpy, recording host<->device transfers."""
    calls = {"asarray": 0, "asnumpy": 0, "zeros": 0}
    mod = types.ModuleType("fakecupy")
    for name in dir(np):
        if not name.startswith("_"):
            setattr(mod, name, getattr(np, name))

    def asarray(a, *args, **kwargs):
        calls["asarray"] += 1
        return np.asarray(a, *args, **kwargs)

    def asnumpy(a):
        calls["asnumpy"] += 1
        return np.array(a)

    def zeros(*args, **kwargs):
        calls["zeros"] += 1
        return np.zeros(*args, **kwargs)

    mod.asarray, mod.asnumpy, mod.zeros = asarray, asnumpy, zeros
    return mod, calls


def test_gpu_device_dispatches_to_the_gpu_array_module(mlp_module, monkeypatch):
    mod, calls = fake_cupy()
    monkeypatch.setattr(backend, "gpu_module", lambda: mod)
    store = VariableStore(xp=mod)
    exe = compile_job(mlp_module, "mlp", store, Target.of("gpu"))
    assert exe.xp is mod
    x = np.random.default_rng(2).standard_normal((8, 16)).astype(np.float32)
    transfers_before = dict(calls)
    probs, labels = exe([x])
    assert calls["asarray"] == transfers_before["asarray"] + 1  # one host->device copy per input
    assert calls["asnumpy"] == transfers_before["asnumpy"] + 2  # one device->host copy per output
    assert calls["zeros"] >= 1  # the arena lives on the device
    ref_probs, ref_labels = reference_mlp(x, store)
    np.testing.assert_allclose(probs, ref_probs, rtol=1e-5, atol=1e-6)


def test_gpu_without_a_gpu_runs_on_numpy(mlp_module, monkeypatch):
    monkeypatch.setattr(backend, "gpu_module", lambda: None)
    exe = compile_job(mlp_module, "mlp", VariableStore(), Target.of("gpu"))
    assert exe.xp is np


@pytest.mark.skipif(backend.gpu_module() is None, reason="needs cupy and a GPU")
def test_real_gpu_matches_cpu(mlp_module):
    import cupy

    cpu_store, gpu_store = VariableStore(seed=1), VariableStore(seed=1, xp=cupy)
    cpu = compile_job(mlp_module, "mlp", cpu_store)
    gpu = compile_job(mlp_module, "mlp", gpu_store, Target.of("gpu"))
    x = np.random.default_rng(3).standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(gpu([x])[0], cpu([x])[0], rtol=1e-4, atol=1e-5)


def test_alloc_without_plan_is_rejected(mlp_module):
    with pytest.raises(CompileError, match="plan-memory"):
        compile_job(mlp_module, "mlp", VariableStore(), pipeline="convert-job-to-buffer")


def test_memory_plan_report_and_picture(mlp_module, tmp_path):
    import xml.etree.ElementTree as ET

    plan = compile_job(mlp_module, "mlp", VariableStore()).memory_plan()
    assert plan.program == "mlp" and plan.lower_bound <= plan.arena_size
    # hb, bias_add's result, is gone: fuse-elementwise makes bias_add + relu one kernel writing r
    assert {b.name.split(" ")[0] for b in plan.buffers} >= {"input", "h", "r", "o", "s", "a"}
    assert any(b.name.startswith("input 0 %x") for b in plan.buffers)
    for b in plan.buffers:
        assert b.offset + b.size <= plan.arena_size and b.first <= b.last
    table = plan.table()
    assert "lower bound" in table and "\nr " in table
    plan.plot(tmp_path / "plan.svg")
    root = ET.parse(tmp_path / "plan.svg").getroot()
    assert root.tag.endswith("svg")
    assert len([e for e in root.iter() if e.tag.endswith("rect")]) >= len({(b.offset, b.first) for b in plan.buffers})


def test_gpu_programs_align_buffers_to_256_bytes(mlp_module, monkeypatch):
    mod, _ = fake_cupy()
    monkeypatch.setattr(backend, "gpu_module", lambda: mod)
    exe = compile_job(mlp_module, "mlp", VariableStore(xp=mod), Target.of("gpu"))
    assert exe.program.device.data == "gpu"
    assert all(b.offset % 256 == 0 for b in exe.memory_plan().buffers)
    cpu = compile_job(mlp_module, "mlp", VariableStore())
    assert cpu.program.device.data == "cpu" and any(b.offset % 256 for b in cpu.memory_plan().buffers)


def test_kernels_share_one_workspace_sized_by_the_largest_need():
    """Every convolution and update of a train job takes its transient scratch from the executor's one workspace
    (kernels/workspace.py), whose regions are the largest kernel's need, each kernel built alone as the executor's
    sizing pass builds it, not their sum; and a step still allocates nothing but its results."""
    import irflow as flow
    import irflow.typing as tp
    from irflow.runtime.kernels import workspace

    flow.clear_default_session()
    try:

        @flow.global_function(type="train")
        def cnn(
            images: tp.Numpy.Placeholder((4, 3, 16, 16)), labels: tp.Numpy.Placeholder((4,), dtype=flow.int32)
        ) -> tp.Numpy:
            h = flow.layers.conv2d(images, 8, 3, padding="SAME", activation=flow.nn.relu, name="c1")
            h = flow.layers.conv2d(h, 16, 3, strides=2, padding="SAME", activation=flow.nn.relu, name="c2")
            h = flow.layers.conv2d(h, 16, 1, padding="SAME", name="c3")
            logits = flow.layers.dense(flow.reshape(h, (4, -1)), 10, name="fc")
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
            return loss

        exe = cnn.executable().executor
        shared = exe.workspace
        alone = []
        for op, comm in exe.unsized.values():
            exe.workspace = workspace.Workspace(np)
            assert exe.step(op, exe.views, np, comm) is None  # sizing: its arrays go
            alone.append((op.kernel.data, exe.workspace.needs))
        exe.workspace = shared
        took = sorted(name for name, _ in alone)
        assert took.count("conv2d") == 3 and took.count("conv2d_grad_filter") == 3 and "conv2d_grad_input" in took
        assert took.count("momentum_update") >= 3
        largest = [max(needs[k] for _, needs in alone) for k in (0, 1)]
        assert shared.needs == largest
        assert shared.nbytes == sum(largest) < sum(sum(needs) for _, needs in alone) / 3

        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal((4, 3, 16, 16)).astype(np.float32), np.array([1, 2, 3, 4], np.int32)]
        cnn(*inputs)
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            exe.feed(inputs)
            for run in exe.steps:
                run()
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        assert sum(s.size_diff for s in after.compare_to(before, "filename") if s.size_diff > 0) <= 4096
    finally:
        flow.clear_default_session()
