"""The local halves of boxing against numpy: chunks follow torch.chunk's ceil rule, padding is zero."""

import numpy as np
import pytest

SIZES = [(n, p) for p in (1, 2, 3, 4) for n in (1, 3, 4, 5, 8)]


def chunks(x: np.ndarray, p: int, axis: int) -> list[np.ndarray]:
    """np.pad to p * ceil(n / p) with zeros, then equal pieces: the reference layout."""
    c = -(-x.shape[axis] // p)
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, p * c - x.shape[axis])
    return np.split(np.pad(x, widths), p, axis=axis)


@pytest.mark.parametrize("n, p", SIZES)
@pytest.mark.parametrize("axis", [0, 1])
def test_shard_slice_takes_the_coordinates_chunk(kernel, rng, n, p, axis) -> None:
    x = rng.standard_normal((n, 3) if axis == 0 else (3, n))
    expected = chunks(x, p, axis)
    for k in range(p):
        (y,) = kernel("shard_slice", [x], [(expected[k].shape, np.float64)], axis=axis, mesh_axis=0, coordinate=k)
        np.testing.assert_array_equal(y, expected[k])


@pytest.mark.parametrize("n, p", SIZES)
def test_shard_embed_pieces_sum_to_the_whole(kernel, rng, n, p) -> None:
    x = rng.standard_normal((2, n))
    pieces = chunks(x, p, 1)
    total = np.zeros_like(x)
    for k in range(p):
        (y,) = kernel("shard_embed", [pieces[k]], [(x.shape, np.float64)], axis=1, mesh_axis=0, coordinate=k)
        assert np.count_nonzero(y[:, : k * pieces[0].shape[1]]) == 0  # zeros before the chunk
        total += y
    np.testing.assert_array_equal(total, x)


def test_broadcast_to_partial_keeps_the_value_once(kernel, rng) -> None:
    x = rng.standard_normal((3, 2))
    outs = [kernel("broadcast_to_partial", [x], [(x.shape, np.float64)], mesh_axis=1, coordinate=k)[0] for k in range(3)]
    np.testing.assert_array_equal(outs[0], x)
    assert not outs[1].any() and not outs[2].any()


def test_pad_appends_zeros(kernel, rng) -> None:
    x = rng.standard_normal((3, 2))
    (y,) = kernel("pad", [x], [((4, 5), np.float64)])
    np.testing.assert_array_equal(y, np.pad(x, [(0, 1), (0, 3)]))
    with pytest.raises(ValueError, match="cannot pad"):
        kernel("pad", [x], [((2, 5), np.float64)])
