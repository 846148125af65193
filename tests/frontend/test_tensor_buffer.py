"""OneFlow's TensorBuffer ops with its signatures (docs/dynamic.md); numpy is the oracle."""

from __future__ import annotations

from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.textir import parse_module, print_module


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def test_oneflow_docstring_example_gives_tensors_of_each_element_shape():
    @flow.global_function()
    def gen_tensor_buffer_job() -> Tuple[tp.ListNumpy, tp.ListNumpy]:
        with flow.scope.placement("cpu", "0:0"):
            x = flow.gen_tensor_buffer([(2,)], [(2, 1), (1, 2)], [0.0, 1.0])
            y = flow.tensor_buffer_to_list_of_tensors(x, (100, 100), flow.float, True)
            return tuple(y)

    (first,), (second,) = gen_tensor_buffer_job()
    np.testing.assert_array_equal(first, np.zeros((2, 1), np.float32))
    np.testing.assert_array_equal(second, np.ones((1, 2), np.float32))
    assert "#job.tensor_buffer<[2, 1], [1, 2]>" in gen_tensor_buffer_job.ir("job")


def test_tensors_taken_out_with_dynamic_out_feed_dynamic_ops_at_their_own_shape():
    @flow.global_function()
    def job() -> Tuple[tp.ListNumpy, tp.Numpy, tp.ListNumpy]:
        x = flow.gen_tensor_buffer((3,), [(2, 3), (1, 3), (4, 3)], [1.5, -2.0, 3.0], data_type=flow.float64)
        a, b, c = flow.tensor_buffer_to_list_of_tensors(x, (4, 3), flow.float64, dynamic_out=True)
        return a * 2.0, flow.math.reduce_sum(b), flow.nn.relu(c - 4.0)

    (doubled,), total, (relu,) = job()
    np.testing.assert_array_equal(doubled, np.full((2, 3), 3.0))
    assert total == pytest.approx(-6.0)
    np.testing.assert_array_equal(relu, np.zeros((4, 3)))


def test_without_dynamic_out_every_element_has_the_out_shape():
    @flow.global_function()
    def same() -> Tuple[tp.Numpy, tp.Numpy]:
        x = flow.gen_tensor_buffer((2,), [(3,), (3,)], [4.0, 5.0], data_type=flow.int32)
        return tuple(flow.tensor_buffer_to_list_of_tensors(x, (3,), flow.float32))

    first, second = same()
    assert first.dtype == np.float32 and first.shape == (3,)
    np.testing.assert_array_equal(second, [5.0, 5.0, 5.0])

    with pytest.raises(flow.TraceError, match=r"element 1 has shape \(2,\), not equal to out_shape \(3,\)") as info:

        @flow.global_function()
        def ragged() -> Tuple[tp.Numpy, tp.Numpy]:
            x = flow.gen_tensor_buffer((2,), [(3,), (2,)], [4.0, 5.0])
            return tuple(flow.tensor_buffer_to_list_of_tensors(x, (3,), flow.float32))

    assert f"{__file__}:" in str(info.value)


def test_tensor_to_tensor_buffer_and_back():
    @flow.global_function()
    def round_trip(x: tp.Numpy.Placeholder(shape=(4, 16, 6, 5), dtype=flow.float32)) -> Tuple[tp.Numpy, tp.Numpy]:
        b = flow.tensor_to_tensor_buffer(x, instance_dims=2)
        return flow.tensor_buffer_to_tensor(b, instance_shape=(6, 5), dtype=flow.float), flow.tensor_buffer_to_tensor(
            b, instance_shape=(6, 5), dtype=flow.float64)  # fmt: skip

    x = np.random.default_rng(0).standard_normal((4, 16, 6, 5)).astype(np.float32)
    same, wider = round_trip(x)
    np.testing.assert_array_equal(same, x)
    assert wider.dtype == np.float64
    np.testing.assert_array_equal(wider, x.astype(np.float64))


def test_tensor_to_tensor_buffer_to_list_of_tensors_gives_each_row():
    @flow.global_function()
    def rows(x: tp.Numpy.Placeholder(shape=(3, 4), dtype=flow.float32)) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        b = flow.tensor_to_tensor_buffer(x, instance_dims=1)
        return tuple(flow.tensor_buffer_to_list_of_tensors(b, (4,), flow.float32))

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for got, want in zip(rows(x), x):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "body, message",
    [
        (lambda x: flow.nn.relu(flow.tensor_to_tensor_buffer(x, 1)), "job.relu does not take a TensorBuffer"),
        (lambda x: flow.tensor_buffer_to_tensor(flow.tensor_to_tensor_buffer(x, 1), flow.float, (3,)),
         r"an element has shape \(4,\), not the instance shape \(3,\)"),
        (lambda x: flow.tensor_buffer_to_tensor(x, flow.float, (4,)), "must be a TensorBuffer"),
        (lambda x: flow.tensor_to_tensor_buffer(x, 2), r"instance_dims must be in \[1, 1\]"),
        (lambda x: flow.gen_tensor_buffer((2,), [(1,)], [0.0]), "needs 2 element shapes of one rank and 2 values"),
        (lambda x: flow.tensor_to_tensor_buffer(x, 1), "returns a TensorBuffer"),
    ],
    ids=["relu", "instance-shape", "not-a-buffer", "instance-dims", "gen-counts", "returned"],
)
def test_misuse_is_a_located_trace_error(body, message):
    with pytest.raises(flow.TraceError, match=message) as info:

        @flow.global_function()
        def bad(x: tp.Numpy.Placeholder(shape=(3, 4), dtype=flow.float32)) -> tp.Numpy:
            return body(x)

    assert f"{__file__}:" in str(info.value)


def test_tensor_buffer_ir_round_trips_at_every_stage():
    @flow.global_function()
    def job() -> Tuple[tp.ListNumpy, tp.ListNumpy]:
        x = flow.gen_tensor_buffer((2,), [(2, 1), (1, 2)], [0.0, 1.0])
        return tuple(flow.tensor_buffer_to_list_of_tensors(x, (100, 100), flow.float, True))

    for stage in ("job", "buffer"):
        text = job.ir(stage)
        assert print_module(parse_module(text), debuginfo=True) == text
    assert "buffer.const_size" in job.ir("buffer")
