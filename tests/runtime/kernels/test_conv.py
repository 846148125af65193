import gc
import tracemalloc

import numpy as np
import pytest

from .conftest import build

# (x shape, w shape, attrs): SAME-style asymmetric pads on odd sizes, strides, dilations, groups, size-1 dims.
CASES = [
    ((2, 3, 7, 7), (4, 3, 3, 3), dict(strides=(1, 1), pads=(1, 1, 1, 1))),
    ((2, 2, 8, 8), (3, 2, 3, 3), dict(strides=(2, 2), pads=(0, 1, 0, 1))),
    ((1, 2, 9, 9), (2, 2, 3, 3), dict(strides=(1, 1), pads=(2, 2, 2, 2), dilations=(2, 2))),
    ((2, 4, 6, 5), (6, 2, 3, 2), dict(strides=(1, 2), pads=(1, 0, 0, 1), groups=2)),
    ((1, 3, 5, 5), (3, 1, 3, 3), dict(strides=(2, 1), pads=(1, 1, 1, 1), groups=3)),
    ((2, 3, 10, 7), (2, 3, 2, 3), dict(strides=(3, 1), pads=(0, 2, 1, 1), dilations=(1, 2))),
    ((3, 1, 5, 5), (2, 1, 5, 5), dict(strides=(1, 1), pads=(0, 0, 0, 0))),
    ((1, 1, 1, 1), (1, 1, 1, 1), dict(strides=(1, 1), pads=(0, 0, 0, 0))),
    # stride 1: dx as a correlation with flipped weights; pads wider than the kernel fall back to col2im
    ((2, 4, 6, 5), (6, 2, 3, 2), dict(strides=(1, 1), pads=(1, 0, 0, 1), groups=2)),
    ((1, 2, 4, 4), (2, 2, 2, 2), dict(strides=(1, 1), pads=(2, 0, 1, 0))),
]
IDS = ["same", "stride2-odd", "dilated", "groups", "depthwise", "rect", "valid-1x1-out", "scalar", "groups-s1", "wide-pad"]


def attrs_of(attrs: dict) -> dict:
    return {"dilations": (1, 1), "groups": 1, **attrs}


def assert_rereads_and_allocates_nothing(build_kernel, kernel, rng, name: str, ins, out, attrs: dict) -> None:
    """A bound float32 run allocates no array memory and reads its ins' current contents (a fresh build agrees).

    On numpy only: tracemalloc sees host memory, and a GPU's temporaries come from cupy's pool."""
    if build_kernel is not build:
        pytest.skip("allocation is measured with tracemalloc, on numpy")
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ins]
    step, (bound,) = build_kernel(name, arrays, [(out, np.float32)], **attrs)
    step()
    # A collection during a run (of earlier tests' garbage; a full one also empties Python's free lists, so the
    # next run's small objects count as new) is not the run's allocation: none runs while this measures.
    gc.disable()
    tracemalloc.start()
    try:
        step()
        for _ in range(2):
            for array in arrays:
                array[...] = rng.standard_normal(array.shape)
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            step()
            peak = tracemalloc.get_traced_memory()[1] - before
            (fresh,) = kernel(name, [array.copy() for array in arrays], [(out, np.float32)], **attrs)
            np.testing.assert_array_equal(bound, fresh)
            assert peak < 4096, f"a run of {name} allocated {peak} bytes"
    finally:
        tracemalloc.stop()
        gc.enable()


def all_three(kernel, attrs: dict, x: np.ndarray, w: np.ndarray, dy: np.ndarray) -> list[np.ndarray]:
    """conv2d of x and w, and its input and filter gradients for dy, in float64."""
    return [
        kernel("conv2d", [x, w], [(dy.shape, np.float64)], **attrs)[0],
        kernel("conv2d_grad_input", [dy, w], [(x.shape, np.float64)], **attrs)[0],
        kernel("conv2d_grad_filter", [dy, x], [(w.shape, np.float64)], **attrs)[0],
    ]


def conv_reference(x: np.ndarray, w: np.ndarray, strides, pads, dilations=(1, 1), groups=1) -> np.ndarray:
    """Direct definition: every output element is one window dot product."""
    n = x.shape[0]
    f, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), pads[:2], pads[2:]))
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, f, oh, ow))
    for o in range(f):
        g = o // (f // groups)
        for i in range(oh):
            for j in range(ow):
                patch = xp[
                    :,
                    g * cg : (g + 1) * cg,
                    i * sh : i * sh + dh * (kh - 1) + 1 : dh,
                    j * sw : j * sw + dw * (kw - 1) + 1 : dw,
                ]
                y[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    return y


@pytest.fixture(params=["few rows", "many rows"])
def rows(request: pytest.FixtureRequest) -> None:
    """The heuristics' paths for these small shapes (in place, `_InPlace`), and those they take with many rows."""
    if request.param == "many rows":
        request.getfixturevalue("without_in_place")


@pytest.mark.parametrize("x_shape, w_shape, attrs", CASES, ids=IDS)
@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
def test_conv2d_matches_direct_definition(kernel, rng, rows, x_shape, w_shape, attrs, dtype, tol) -> None:
    x, w = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)
    ref = conv_reference(x, w, **attrs)
    (y,) = kernel("conv2d", [x, w], [(ref.shape, dtype)], **attrs_of(attrs))
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("x_shape, w_shape, attrs", CASES, ids=IDS)
def test_conv2d_grads_match_finite_differences(kernel, finite_diff, rng, rows, x_shape, w_shape, attrs) -> None:
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    y_shape = conv_reference(x, w, **attrs).shape
    dy = rng.standard_normal(y_shape)
    a = attrs_of(attrs)
    (dx,) = kernel("conv2d_grad_input", [dy, w], [(x_shape, np.float64)], **a)
    (dw,) = kernel("conv2d_grad_filter", [dy, x], [(w_shape, np.float64)], **a)
    np.testing.assert_allclose(
        dx, finite_diff("conv2d", [x, w], 0, (y_shape, np.float64), dy, **a), rtol=1e-6, atol=1e-7
    )
    np.testing.assert_allclose(
        dw, finite_diff("conv2d", [x, w], 1, (y_shape, np.float64), dy, **a), rtol=1e-6, atol=1e-7
    )


@pytest.mark.parametrize("x_shape, w_shape, attrs", CASES[:6], ids=IDS[:6])
def test_conv2d_matches_torch(kernel, rng, rows, x_shape, w_shape, attrs) -> None:
    torch = pytest.importorskip("torch")
    a = attrs_of(attrs)
    x, w = rng.standard_normal(x_shape).astype(np.float32), rng.standard_normal(w_shape).astype(np.float32)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    top, bottom, left, right = a["pads"]
    ty = torch.nn.functional.conv2d(
        torch.nn.functional.pad(tx, (left, right, top, bottom)),
        tw,
        stride=a["strides"],
        dilation=a["dilations"],
        groups=a["groups"],
    )
    dy = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(dy))
    (y,) = kernel("conv2d", [x, w], [(tuple(ty.shape), np.float32)], **a)
    (dx,) = kernel("conv2d_grad_input", [dy, w], [(x_shape, np.float32)], **a)
    (dw,) = kernel("conv2d_grad_filter", [dy, x], [(w_shape, np.float32)], **a)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("epilogue", ["bias_add", "bias_add_relu"])
@pytest.mark.parametrize("x_shape, w_shape, attrs", CASES, ids=IDS)
def test_conv2d_epilogue_adds_the_bias_and_applies_relu(
    kernel, rng, monkeypatch, rows, x_shape, w_shape, attrs, epilogue
) -> None:
    """The fused epilogue against the direct definition, in chunks of one image (one per chunk, the last short)."""
    from irflow.runtime.kernels import conv

    monkeypatch.setattr(conv, "_CHUNK_BYTES", 1)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    bias = rng.standard_normal(w_shape[0])
    ref = conv_reference(x, w, **attrs) + bias[:, None, None]
    if epilogue == "bias_add_relu":
        ref = np.maximum(ref, 0)
    (y,) = kernel("conv2d", [x, w, bias], [(ref.shape, np.float64)], epilogue=epilogue, **attrs_of(attrs))
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "ins, epilogue, match",
    [(1, None, "epilogue None with 1 bias"), (0, "bias_add", "epilogue 'bias_add' with 0 bias"), (1, "relu", "'relu'")],
)
def test_conv2d_rejects_an_epilogue_without_its_bias(build_kernel, ins, epilogue, match) -> None:
    x, w = np.zeros((1, 3, 5, 5)), np.zeros((2, 3, 3, 3))
    attrs = {} if epilogue is None else {"epilogue": epilogue}
    with pytest.raises(ValueError, match=match):
        build_kernel("conv2d", [x, w, *[np.zeros(2)] * ins], [((1, 2, 3, 3), np.float64)], **attrs)


def test_conv2d_rejects_a_bias_of_the_wrong_length(build_kernel) -> None:
    x, w = np.zeros((1, 3, 5, 5)), np.zeros((2, 3, 3, 3))
    with pytest.raises(ValueError, match=r"conv2d: bias has shape \(3,\), expected \(2,\)"):
        build_kernel("conv2d", [x, w, np.zeros(3)], [((1, 2, 3, 3), np.float64)], epilogue="bias_add")


def test_conv2d_rejects_mismatched_groups(build_kernel) -> None:
    with pytest.raises(ValueError, match="groups"):
        build_kernel("conv2d", [np.zeros((1, 4, 5, 5)), np.zeros((2, 3, 3, 3))], [((1, 2, 3, 3), np.float64)], groups=1)


def test_conv2d_rejects_a_wrong_output_shape(build_kernel) -> None:
    with pytest.raises(ValueError, match=r"output has shape \(1, 2, 5, 5\), expected \(1, 2, 3, 3\)"):
        build_kernel("conv2d", [np.zeros((1, 3, 5, 5)), np.zeros((2, 3, 3, 3))], [((1, 2, 5, 5), np.float64)])


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs", [CASES[0], CASES[2], CASES[3]], ids=["channels-last", "channel-major", "groups"]
)
def test_batch_chunks_agree_with_one_chunk(kernel, rng, monkeypatch, without_in_place, x_shape, w_shape, attrs) -> None:
    """Chunks of at most two images over a batch of five: four (an even number, for two threads) of one and two
    images, filter grads summed across."""
    from irflow.runtime.kernels import conv

    x_shape = (5, *x_shape[1:])
    a = attrs_of(attrs)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    y_shape = conv_reference(x[:1], w, **attrs).shape[1:]
    dy = rng.standard_normal((5, *y_shape))
    expected = [
        kernel("conv2d", [x, w], [((5, *y_shape), np.float64)], **a)[0],
        kernel("conv2d_grad_input", [dy, w], [(x_shape, np.float64)], **a)[0],
        kernel("conv2d_grad_filter", [dy, x], [(w_shape, np.float64)], **a)[0],
    ]
    image_bytes = int(np.prod(y_shape[1:])) * int(np.prod(w_shape[1:])) * x_shape[1] // w_shape[1] * 8
    monkeypatch.setattr(conv, "_CHUNK_BYTES", 2 * image_bytes)
    assert [c.stop - c.start for c in conv._Conv(a, x_shape, w_shape, 8).chunks] == [1, 1, 1, 2]
    got = [
        kernel("conv2d", [x, w], [((5, *y_shape), np.float64)], **a)[0],
        kernel("conv2d_grad_input", [dy, w], [(x_shape, np.float64)], **a)[0],
        kernel("conv2d_grad_filter", [dy, x], [(w_shape, np.float64)], **a)[0],
    ]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("slot_per_chunk", [True, False], ids=["slot per chunk", "grouped slots"])
@pytest.mark.parametrize(
    "x_shape, w_shape, attrs", [CASES[0], CASES[1], CASES[3]], ids=["correlation", "col2im", "groups"]
)
def test_threads_take_the_chunks_and_agree_with_one_thread(
    kernel, rng, monkeypatch, without_in_place, x_shape, w_shape, attrs, slot_per_chunk
) -> None:
    """Five one-image chunks taken by 2 and 3 threads: bit for bit the outputs of one thread, filter gradients
    included (each chunk's product has a slot, or with little room for slots each group of chunks, added in
    order whoever ran it)."""
    from irflow.runtime import threads
    from irflow.runtime.kernels import conv, parallel

    x_shape = (5, *x_shape[1:])
    a = attrs_of(attrs)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    y_shape = (5, *conv_reference(x[:1], w, **attrs).shape[1:])
    dy = rng.standard_normal(y_shape)
    whole = all_three(kernel, a, x, w, dy)  # the batch in one chunk
    monkeypatch.setattr(conv, "_CHUNK_BYTES", 1)
    if not slot_per_chunk:  # room for none: the least number of groups, so some hold two chunks
        monkeypatch.setattr(parallel, "_SLOTS_BYTES", 0)
        assert [len(g) for g in parallel.reduction_groups(5, 8)] == [1, 1, 1, 2]

    try:
        expected = all_three(kernel, a, x, w, dy)
        for count in (2, 3):
            threads.set_cpu_thread_num(count)
            y, dx, dw = all_three(kernel, a, x, w, dy)
            np.testing.assert_array_equal(y, expected[0])
            np.testing.assert_array_equal(dx, expected[1])
            np.testing.assert_array_equal(dw, expected[2])
    finally:
        threads.set_cpu_thread_num(None)
    for got, want in zip(expected, whole, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# Stride 1, no dilation, one group: the cases `_conv2d_by_shifts` can take when forced to every channel count.
SHIFTABLE = [c for c in CASES if c[2]["strides"] == (1, 1) and "dilations" not in c[2] and "groups" not in c[2]]
SHIFT_IDS = [i for i, c in zip(IDS, CASES) if c in SHIFTABLE]


def filter_grad_reference(dy: np.ndarray, x: np.ndarray, kernel: tuple[int, int], pads) -> np.ndarray:
    """dw[f, c, i, j] = sum over n, h, w of dy[n, f, h, w] x_padded[n, c, h + i, w + j] (stride 1, one group)."""
    xp = np.pad(x, ((0, 0), (0, 0), pads[:2], pads[2:]))
    oh, ow = dy.shape[2:]
    return np.stack(
        [
            np.stack([np.einsum("nfhw,nchw->fc", dy, xp[:, :, i : i + oh, j : j + ow]) for j in range(kernel[1])], -1)
            for i in range(kernel[0])
        ],
        -2,
    )


@pytest.mark.parametrize("epilogue", [None, "bias_add_relu"])
@pytest.mark.parametrize("x_shape, w_shape, attrs", SHIFTABLE, ids=SHIFT_IDS)
def test_conv2d_by_shifts_matches_direct_definition(
    kernel, rng, monkeypatch, without_in_place, x_shape, w_shape, attrs, epilogue
) -> None:
    """One GEMM per tap over shifted rows, forward and filter gradient: one image per chunk (short last chunk
    of a batch of 3), 1 and 2 threads."""
    from irflow.runtime import threads
    from irflow.runtime.kernels import conv, conv_winograd

    monkeypatch.setattr(conv, "_SHIFT_CHANNELS", range(1, 1 << 20))
    monkeypatch.setattr(conv, "_SHIFT_ROWS", 1)
    monkeypatch.setattr(conv_winograd, "_CHANNELS", {"forward": (1 << 20,) * 2, "filter": (1 << 20,) * 2})  # no Winograd
    a = attrs_of(attrs)
    x_shape = (3, *x_shape[1:])
    assert conv._by_shifts(conv._Conv(a, x_shape, w_shape, 8))
    x, w, bias = rng.standard_normal(x_shape), rng.standard_normal(w_shape), rng.standard_normal(w_shape[0])
    ref = conv_reference(x, w, **attrs)
    ins, extra = ([x, w], {}) if epilogue is None else ([x, w, bias], {"epilogue": epilogue})
    if epilogue is not None:
        ref = np.maximum(ref + bias[:, None, None], 0)
    dy = rng.standard_normal(ref.shape)
    dw_ref = filter_grad_reference(dy, x, w_shape[2:], attrs["pads"])
    try:
        for count in (1, 2):
            threads.set_cpu_thread_num(count)
            (y,) = kernel("conv2d", ins, [(ref.shape, np.float64)], **a, **extra)
            np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)
            (y32,) = kernel("conv2d", [v.astype(np.float32) for v in ins], [(ref.shape, np.float32)], **a, **extra)
            np.testing.assert_allclose(y32, ref, rtol=1e-4, atol=1e-4)
            (dw,) = kernel("conv2d_grad_filter", [dy, x], [(w_shape, np.float64)], **a)
            np.testing.assert_allclose(dw, dw_ref, rtol=1e-12, atol=1e-12)
            ins32 = [dy.astype(np.float32), x.astype(np.float32)]
            (dw32,) = kernel("conv2d_grad_filter", ins32, [(w_shape, np.float32)], **a)
            np.testing.assert_allclose(dw32, dw_ref, rtol=1e-4, atol=1e-4)
    finally:
        threads.set_cpu_thread_num(None)


@pytest.mark.parametrize("channels, filters, shifts", [(16, 16, True), (32, 16, True), (32, 32, False), (8, 16, False)])
def test_3x3_path_by_channels_matches_torch(
    kernel, rng, without_in_place, channels: int, filters: int, shifts: bool
) -> None:
    """The residual CNN's 3x3 convolutions and their gradients (dx by correlation) on the default paths:
    shifted rows for 16 input channels, and for 32 into 16 (stem2's input gradient); im2col otherwise;
    the forward and dx by Winograd from 12 input channels, dw from 32."""
    torch = pytest.importorskip("torch")
    from irflow.runtime.kernels import conv

    a = attrs_of(dict(strides=(1, 1), pads=(1, 1, 1, 1)))
    x, w = rng.standard_normal((5, channels, 9, 9)), rng.standard_normal((filters, channels, 3, 3))
    assert conv._by_shifts(conv._Conv(a, x.shape, w.shape, 8)) == shifts
    dy = rng.standard_normal((5, filters, 9, 9))
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, padding=1)
    ty.backward(torch.tensor(dy))
    (y,) = kernel("conv2d", [x, w], [(dy.shape, np.float64)], **a)
    (dx,) = kernel("conv2d_grad_input", [dy, w], [(x.shape, np.float64)], **a)
    (dw,) = kernel("conv2d_grad_filter", [dy, x], [(w.shape, np.float64)], **a)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-12, atol=1e-12)


def conv_grads_reference(x, w, dy, strides, pads, dilations=(1, 1), groups=1) -> tuple[np.ndarray, np.ndarray]:
    """dx and dw by the direct definition's adjoint: each output element's dy goes back to its window's inputs
    (times w) and to w (times the window)."""
    f, cg, kh, kw = w.shape
    (sh, sw), (dh, dw_) = strides, dilations
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), pads[:2], pads[2:]))
    dxp, dw = np.zeros(xp.shape), np.zeros(w.shape)
    for o in range(f):
        channels = slice(o // (f // groups) * cg, (o // (f // groups) + 1) * cg)
        for i in range(dy.shape[2]):
            for j in range(dy.shape[3]):
                rows = slice(i * sh, i * sh + dh * (kh - 1) + 1, dh)
                cols = slice(j * sw, j * sw + dw_ * (kw - 1) + 1, dw_)
                g = dy[:, o, i, j][:, None, None, None]
                dxp[:, channels, rows, cols] += g * w[o]
                dw[o] += (g * xp[:, channels, rows, cols]).sum(axis=0)
    return dxp[:, :, pads[0] : pads[0] + x.shape[2], pads[2] : pads[2] + x.shape[3]], dw


# In-place paths' own cases: 1x1 stride-1 unpadded convolutions are GEMMs on views of one image or of one pixel
# per image (else on copies), with groups; a strided 1x1.
ALL_CASES = CASES + [
    ((1, 4, 3, 5), (6, 4, 1, 1), dict(strides=(1, 1), pads=(0, 0, 0, 0))),
    ((3, 4, 1, 1), (6, 2, 1, 1), dict(strides=(1, 1), pads=(0, 0, 0, 0), groups=2)),
    ((3, 4, 3, 2), (6, 4, 1, 1), dict(strides=(1, 1), pads=(0, 0, 0, 0))),
    ((2, 4, 5, 4), (6, 4, 1, 1), dict(strides=(2, 2), pads=(0, 0, 0, 0))),
    ((2, 6, 1, 1), (5, 6, 3, 3), dict(strides=(1, 1), pads=(1, 1, 1, 1))),
]
ALL_IDS = IDS + ["1x1-one-image", "1x1-one-pixel-groups", "1x1-copied", "1x1-stride2", "3x3-one-pixel"]
ALGORITHMS = ["in_place", "im2col", "shifts", "winograd", "dft", "correlation"]


def applies(algorithm: str, w_shape, attrs: dict, layout: str) -> bool:
    """Whether `algorithm` can run some direction of the convolution (`correlation`: only the input gradient)."""
    a = attrs_of(attrs)
    stride_one = a["strides"] == a["dilations"] == (1, 1)
    one_group = stride_one and a["groups"] == 1
    kh, kw = w_shape[2:]
    return {
        "in_place": True,
        "im2col": True,
        "shifts": one_group,
        "winograd": one_group and (kh, kw) == (3, 3),
        "dft": one_group and layout == "NCHW",  # the transforms read contiguous operands only
        "correlation": stride_one and min(a["pads"]) >= 0 and all(
            d * (k - 1) >= max(p) for d, k, p in zip(a["dilations"], (kh, kw), (a["pads"][:2], a["pads"][2:]))
        ),
    }[algorithm]


@pytest.fixture
def forced(monkeypatch):
    """force(name): kernels built after it run algorithm `name` wherever it is one of their candidates (their
    heuristics' choice elsewhere); returns the list of (kernel kind, algorithm) built."""
    from irflow.runtime.kernels import algorithms, conv, conv_dft

    monkeypatch.setattr(conv, "_IN_PLACE_BYTES", 1 << 62)  # in place a candidate everywhere
    monkeypatch.setattr(conv, "_SEARCH_CHANNELS", 0)  # Winograd and shifted rows too, whatever the channels
    built: list[tuple[str, str]] = []

    def force(name: str) -> list[tuple[str, str]]:
        if name == "dft":  # the transforms a candidate wherever they apply (they then also take dx whole)
            monkeypatch.setattr(conv_dft, "_ADVANTAGE", 0.0)

        def choose(xp, key, candidates, heuristic):
            chosen = name if name in candidates else heuristic
            built.append((key[0], chosen))
            return candidates[chosen]()

        monkeypatch.setattr(algorithms, "choose", choose)
        return built

    return force


def stored(a: np.ndarray, layout: str) -> np.ndarray:
    """a (N, C, H, W) as the kernels get it: contiguous, or a view of channels-last storage."""
    return a if layout == "NCHW" else np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("x_shape, w_shape, attrs", ALL_CASES, ids=ALL_IDS)
def test_every_algorithm_matches_the_direct_definition(kernel, rng, forced, x_shape, w_shape, attrs, algorithm, layout):
    """Each algorithm forced where it applies, forward and both gradients against the direct definition and its
    adjoint, float64 and float32, x and dy (and y and dx) contiguous or views of channels-last storage."""
    if not applies(algorithm, w_shape, attrs, layout):
        pytest.skip(f"{algorithm} does not run this convolution")
    built = forced(algorithm)
    a = attrs_of(attrs)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    y_ref = conv_reference(x, w, **attrs)
    dy = rng.standard_normal(y_ref.shape)
    dx_ref, dw_ref = conv_grads_reference(x, w, dy, **attrs)
    for dtype, tol in [(np.float64, 1e-12), (np.float32, 1e-4)]:
        xs, ws, dys = stored(x.astype(dtype), layout), w.astype(dtype), stored(dy.astype(dtype), layout)
        y_out, dx_out = stored(np.zeros(y_ref.shape, dtype), layout), stored(np.zeros(x_shape, dtype), layout)
        (y,) = kernel("conv2d", [xs, ws], [y_out], **a)
        (dx,) = kernel("conv2d_grad_input", [dys, ws], [dx_out], **a)
        (dw,) = kernel("conv2d_grad_filter", [dys, xs], [(w_shape, dtype)], **a)
        np.testing.assert_allclose(y, y_ref, rtol=tol, atol=tol)
        np.testing.assert_allclose(dx, dx_ref, rtol=tol, atol=tol)
        np.testing.assert_allclose(dw, dw_ref, rtol=tol, atol=tol)
    ran = {kind for kind, name in built if name == algorithm}
    if algorithm == "in_place":
        assert ran == {"conv2d", "conv2d_grad_input", "conv2d_grad_filter"}
    elif algorithm == "correlation":
        assert "conv2d_grad_input" in ran
    else:
        assert ran


def chosen(x_shape, w_shape, attrs: dict) -> dict[str, tuple[str, set[str]]]:
    """Per kernel kind, the heuristics' algorithm for float32 operands and the candidates a search would try."""
    from irflow.runtime.kernels import algorithms, conv, get_kernel

    seen: dict[str, tuple[str, set[str]]] = {}

    def choose(xp, key, candidates, heuristic):
        seen.setdefault(key[0], (heuristic, set(candidates)))
        return candidates[heuristic]()

    a = attrs_of(attrs)
    y_shape = conv._Conv(a, x_shape, w_shape, 4).y_shape
    x, w, dy = (np.zeros(shape, np.float32) for shape in (x_shape, w_shape, y_shape))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(algorithms, "choose", choose)
        get_kernel("conv2d")(np, a, [x, w], [np.empty(y_shape, np.float32)])
        get_kernel("conv2d_grad_input")(np, a, [dy, w], [np.empty(x_shape, np.float32)])
        get_kernel("conv2d_grad_filter")(np, a, [dy, x], [np.empty(w_shape, np.float32)])
    return seen


SAME_3X3, VALID = dict(strides=(1, 1), pads=(1, 1, 1, 1)), dict(strides=(1, 1), pads=(0, 0, 0, 0))
# Late ResNet stages at small images or batches: few rows (M = N oh ow) against the weights.
FEW_ROWS = {
    "512-3x3-1x1-image": ((2, 512, 1, 1), (512, 512, 3, 3), SAME_3X3),
    "1024-2048-1x1-stride2": ((2, 1024, 2, 2), (2048, 1024, 1, 1), dict(strides=(2, 2), pads=(0, 0, 0, 0))),
    "512-2048-1x1": ((2, 512, 1, 1), (2048, 512, 1, 1), VALID),
    "64-3x3-8x8": ((2, 64, 8, 8), (64, 64, 3, 3), SAME_3X3),
}
# benchmarks/train_step.py's convolutions at its batch of 100 (their input gradients where the step has them).
MANY_ROWS = {
    "lenet-conv1": ((100, 1, 28, 28), (32, 1, 5, 5), dict(strides=(1, 1), pads=(2, 2, 2, 2))),
    "lenet-conv2": ((100, 32, 14, 14), (64, 32, 5, 5), dict(strides=(1, 1), pads=(2, 2, 2, 2))),
    "resnet-stem1": ((100, 1, 28, 28), (16, 1, 3, 3), SAME_3X3),
    "resnet-block1": ((100, 16, 28, 28), (16, 16, 3, 3), SAME_3X3),
    "resnet-stem2": ((100, 16, 14, 14), (32, 16, 3, 3), SAME_3X3),
    "resnet-block2": ((100, 32, 14, 14), (32, 32, 3, 3), SAME_3X3),
}
# What the heuristics chose for MANY_ROWS before the in-place path: forward, input gradient, filter gradient.
MANY_ROWS_CHOICES = {
    "lenet-conv1": ("im2col", "correlation", "im2col"),
    "lenet-conv2": ("dft", "dft", "dft"),
    "resnet-stem1": ("im2col", "correlation", "im2col"),
    "resnet-block1": ("winograd", "correlation", "shifts"),
    "resnet-stem2": ("winograd", "correlation", "shifts"),
    "resnet-block2": ("winograd", "correlation", "winograd"),
}


@pytest.mark.parametrize("name", FEW_ROWS)
def test_few_rows_run_in_place(name) -> None:
    """Where the weights outweigh the rows, all three kernels run in place, not by Winograd or DFTs."""
    choices = chosen(*FEW_ROWS[name])
    assert {kind: heuristic for kind, (heuristic, _) in choices.items()} == dict.fromkeys(
        ("conv2d", "conv2d_grad_input", "conv2d_grad_filter"), "in_place"
    )


@pytest.mark.parametrize("name", MANY_ROWS)
def test_many_rows_keep_their_algorithms(name) -> None:
    """The benchmark's convolutions keep their heuristics' algorithms, and a measured search does not try the
    in-place GEMM on them: their choices are those of before it."""
    choices = chosen(*MANY_ROWS[name])
    kinds = ("conv2d", "conv2d_grad_input", "conv2d_grad_filter")
    assert tuple(choices[kind][0] for kind in kinds) == MANY_ROWS_CHOICES[name]
    assert not any("in_place" in candidates for _, candidates in choices.values())


def test_kernels_built_again_at_other_sizes_do_not_choose_by_their_rows() -> None:
    """A dynamic job's kernels are built at each batch size within the scratch of their first build: the rows,
    which change with the batch, must not switch them to or from the in-place GEMM."""
    from irflow.runtime.kernels import algorithms

    with algorithms.varying_sizes():
        choices = chosen(*FEW_ROWS["512-2048-1x1"])
    assert [choices[kind][0] for kind in ("conv2d", "conv2d_grad_input", "conv2d_grad_filter")] == [
        "im2col",
        "correlation",
        "im2col",
    ]
