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


# ----------------------------------------------------------------- element shapes known only at run time


def test_a_tensor_buffer_of_a_list_input_gives_tensors_of_the_run_time_element_shape():
    """tensor_to_tensor_buffer of a dynamic input: its elements' shape is the input's trailing sizes of
    each step, and the tensors taken out with dynamic_out feed ops at that shape."""

    @flow.global_function()
    def rows(x: tp.ListNumpy.Placeholder((3, 5), dtype=flow.float32)) -> Tuple[tp.ListNumpy, tp.ListNumpy, tp.ListNumpy]:
        b = flow.tensor_to_tensor_buffer(x, instance_dims=1)
        first, second, third = flow.tensor_buffer_to_list_of_tensors(b, (5,), flow.float64, dynamic_out=True)
        return first * 2.0, flow.math.reduce_sum(second, keepdims=True), flow.nn.relu(third - 3.0)

    assert "#job.tensor_buffer<[5] dynamic [0, 1]>" in rows.ir("job")
    rng = np.random.default_rng(0)
    for c in (5, 2, 4, 1, 5):
        x = rng.standard_normal((3, c)).astype(np.float32) * 4
        (first,), (total,), (third,) = rows([x])
        assert first.dtype == np.float64 and first.shape == third.shape == (c,)
        np.testing.assert_array_equal(first, x[0].astype(np.float64) * 2)
        np.testing.assert_allclose(total, [x[1].astype(np.float64).sum()], rtol=1e-12)
        np.testing.assert_array_equal(third, np.maximum(x[2].astype(np.float64) - 3, 0))


def test_elements_of_two_run_time_axes_keep_their_layout():
    @flow.global_function()
    def images(x: tp.ListNumpy.Placeholder((2, 4, 3), dtype=flow.float32)) -> Tuple[tp.ListNumpy, tp.ListNumpy]:
        b = flow.tensor_to_tensor_buffer(x, instance_dims=2)
        return tuple(flow.transpose(t, perm=[1, 0]) for t in
                     flow.tensor_buffer_to_list_of_tensors(b, (4, 3), flow.float32, dynamic_out=True))  # fmt: skip

    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    for h, w in ((4, 3), (2, 3), (3, 1), (4, 3)):
        part = x[:, :h, :w].copy()
        (a,), (b,) = images([part])
        np.testing.assert_array_equal(a, part[0].T)
        np.testing.assert_array_equal(b, part[1].T)


def test_run_time_element_shapes_are_checked_where_an_op_needs_a_static_one():
    @flow.global_function()
    def fixed(x: tp.ListNumpy.Placeholder((3, 4), dtype=flow.float32)) -> Tuple[tp.ListNumpy, tp.Numpy]:
        b = flow.tensor_to_tensor_buffer(x, instance_dims=1)
        whole = flow.tensor_buffer_to_tensor(b, flow.float64, (4,))  # as many rows as x, each of 4
        return whole, flow.tensor_buffer_to_list_of_tensors(b, (4,), flow.float32)[2]

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    (whole,), last = fixed([x])
    np.testing.assert_array_equal(whole, x.astype(np.float64))
    np.testing.assert_array_equal(last, x[2])
    with pytest.raises(flow.ExecutionError, match=r"job.tensor_buffer_to_tensor: element axis 0, operand #0 axis 1 "
                       r"\(argument 'x' axis 1\), and instance_shape's 4 must have the same size, given 3 and 4") as info:
        fixed([x[:, :3].copy()])
    assert f"{__file__}:" in str(info.value)
    with pytest.raises(flow.ExecutionError, match=r"job.tensor_buffer_get takes every element of the TensorBuffer's "
                       r"bound .*\(argument 'x' axis 0\) and its bound 3 must have the same size, given 2 and 3"):
        fixed([x[:2].copy()])

    @flow.global_function()
    def rows(x: tp.ListNumpy.Placeholder((3, 4), dtype=flow.float32)) -> tp.ListNumpy:
        return flow.tensor_buffer_to_tensor(flow.tensor_to_tensor_buffer(x, 1), flow.float32, (4,))

    for n in (2, 0, 3):  # a TensorBuffer of fewer elements than its bound becomes fewer rows
        np.testing.assert_array_equal(rows([x[:n]])[0], x[:n])


def test_a_run_time_tensor_buffer_round_trips_as_text_at_every_stage():
    @flow.global_function()
    def job(x: tp.ListNumpy.Placeholder((3, 5), dtype=flow.float32)) -> tp.ListNumpy:
        return flow.tensor_buffer_to_list_of_tensors(flow.tensor_to_tensor_buffer(x, 1), (5,), flow.float, True)[0]

    job([np.ones((3, 2), np.float32)])
    for stage in ("job", "buffer"):
        text = job.ir(stage)
        assert print_module(parse_module(text), debuginfo=True) == text


def test_a_tensor_list_becomes_a_tensor_buffer_of_its_rows():
    """As OneFlow's kernel (which takes the blob's whole shape): the instances' rows together, each an element."""

    @flow.global_function()
    def rows(x: tp.ListListNumpy.Placeholder((4, 3), dtype=flow.float32)) -> tp.ListListNumpy:
        return flow.tensor_buffer_to_tensor(flow.tensor_to_tensor_buffer(x, 1), flow.float32, (3,)) * 2.0

    a, b = np.ones((1, 3), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
    ((first, second),) = rows([[a, b]])
    np.testing.assert_array_equal(first, a * 2)
    np.testing.assert_array_equal(second, b * 2)


def test_a_tensor_buffer_of_two_run_time_buffer_axes_gives_back_its_elements_in_order():
    @flow.global_function()
    def grid(x: tp.ListNumpy.Placeholder((3, 4, 2), dtype=flow.float32)) -> tp.ListNumpy:
        b = flow.tensor_to_tensor_buffer(x, instance_dims=1)  # up to 3 x 4 elements of 2 values
        return flow.tensor_buffer_to_tensor(b, flow.float64, (2,))

    x = np.random.default_rng(4).standard_normal((3, 4, 2)).astype(np.float32)
    for rows, columns in ((3, 4), (2, 3), (1, 4), (3, 1)):
        part = x[:rows, :columns].copy()
        np.testing.assert_array_equal(grid([part])[0], part.astype(np.float64))
