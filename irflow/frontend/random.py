"""flow.random: the session's seed and OneFlow 0.x's random ops (bernoulli, coin_flip, permutations, shuffle).

Each op draws anew every step. Without a `seed`, one is derived from the job's and the op's
names (Trace.op_seed), so a program draws the same values on every run; OneFlow seeds those
from Python's `random` instead. The draws come from source ops (job.random_uniform,
job.random_permutation), whole on every device, so samples do not depend on the device count.
OneFlow 0.x has no uniform or normal sampling op in its Python API (flow.random_uniform_initializer
and flow.random_normal_initializer initialize variables only), so neither has irflow.
"""

from __future__ import annotations

from xdsl.dialects.builtin import f64

from irflow.dialects import job
from irflow.dialects.bounds import dynamic_axes
from irflow.frontend import dtypes
from irflow.frontend.blob import Blob
from irflow.frontend.locations import fail
from irflow.frontend.ops import constant, gather
from irflow.frontend.session import default_session
from irflow.frontend.tracing import build, current


def seed(value: int) -> None:
    """Same seed, same initial variables: set it before a job's first call."""
    default_session().set_seed(value)


def _seed(value: object, name: str, what: str) -> int:
    """The user's seed (any int64, as OneFlow's attribute), else one derived from the job and `name`."""
    if value is None:
        return current(what).op_seed(name)
    if not dtypes.is_int(value) or not -(2**63) <= value < 2**63:
        fail(f"{what}: seed must be an int64 or None, got {value!r}")
    return int(value)


def _samples(p: Blob, seed: int, dtype: dtypes.DType, name: str, what: str) -> Blob:
    """Bernoulli(p) samples of `dtype`: a job.random_uniform `<name>-uniform` of p's shape, then job.bernoulli.

    For a dynamic p the draws are made at its bound, their first taken at its actual sizes (job.unpin_size), as
    a dropout mask's."""
    draws = job.tensor(p.shape, (dtypes.float64 if p.dtype is dtypes.float64 else dtypes.float32).element_type)
    u = build(job.RandomUniformOp, [], draws, f"{name}-uniform", what, seed=seed)
    if dynamic := dynamic_axes(p.value.type):
        u = build(job.UnpinSizeOp, [u, p], None, None, what, axes=list(dynamic))
    return build(job.BernoulliOp, [u, p], job.tensor(p.shape, dtype.element_type), name, what)


def bernoulli(x: Blob, seed: int | None = None, dtype: dtypes.DType | None = None, name: str | None = None) -> Blob:
    """1 with probability x, else 0, for each element of the floating-point Blob `x`, in `dtype` (default x's).

    No gradient flows back to x. An element of x outside [0, 1] stops the step with an
    ExecutionError at this line (OneFlow's kernel checks it too).
    """
    what = "flow.random.bernoulli"
    trace = current(what)
    if not isinstance(x, Blob) or not x.dtype.is_floating_point:
        fail(f"{what}: x must be a floating-point Blob of probabilities, got {x!r}")
    try:
        dtype = dtypes.as_dtype(dtype, f"{what}: dtype") if dtype is not None else x.dtype
    except TypeError as err:
        fail(str(err))
    name = name or trace.unique_name("Bernoulli")
    return _samples(x, _seed(seed, name, what), dtype, name, what)


def coin_flip(batch_size: int = 1, seed: int | None = None, probability: float = 0.5, name: str | None = None) -> Blob:
    """An int8 Blob of `batch_size` coin flips, each 1 with `probability` (OneFlow's flow.random.coin_flip,
    also flow.random.CoinFlip, which picks the images an image op mirrors)."""
    what = "flow.random.coin_flip"
    trace = current(what)
    if not dtypes.is_int(batch_size) or batch_size < 1:
        fail(f"{what}: batch_size must be a positive int, got {batch_size!r}")
    if not dtypes.is_number(probability) or not 0.0 <= probability <= 1.0:
        fail(f"{what}: probability must be in [0, 1], got {probability!r}")
    name = name or trace.unique_name("CoinFlip")
    p = constant(float(probability), dtypes.float32, (batch_size,))
    return _samples(p, _seed(seed, name, what), dtypes.int8, name, what)


CoinFlip = coin_flip


def generate_random_batch_permutation_indices(value: Blob, seed: int | None = None, name: str | None = None) -> Blob:
    """An int32 Blob (n,): a random permutation of 0..n-1 for `value`'s n entries along axis 0, new each step.

    Only value's size is read; a dynamic axis 0 gives a permutation of its actual entries (docs/dynamic.md).
    """
    return _permutation(value, seed, name, "flow.random.generate_random_batch_permutation_indices")


def shuffle(value: Blob, seed: int | None = None, name: str | None = None) -> Blob:
    """`value` with its entries along axis 0 in a random order, new each step: flow.gather at
    generate_random_batch_permutation_indices, as in OneFlow, so a train job's gradient flows back
    through the permutation (gather's gradient puts each row back where it came from)."""
    indices = _permutation(value, seed, f"{name}-indices" if name else None, "flow.random.shuffle")
    return gather(value, indices, name=name)


def _permutation(value: Blob, seed: int | None, name: str | None, what: str) -> Blob:
    trace = current(what)
    if not isinstance(value, Blob) or not value.shape:
        fail(f"{what}: value must be a Blob with an axis 0 to permute, got {value!r}")
    name = name or trace.unique_name("random_batch_permutation_indices")
    if 0 not in dynamic_axes(value.value.type):
        result = job.tensor((value.shape[0],), dtypes.int32.element_type)
        return build(job.RandomPermutationOp, [], result, name, what, seed=_seed(seed, name, what))
    # A dynamic axis 0: the order of as many draws as it has entries, largest first, which is a uniformly random
    # permutation of them (random_permutation's own draws, sorted). The draws are made at its bound and their
    # first taken at its actual size, as a dropout mask's (job.unpin_size), sized by a sum over the first element
    # of each entry (its only use is its size: no pass over the whole value).
    rows = value
    if value.ndim > 1:
        ends = [value.shape[0], *(min(d, 1) for d in value.shape[1:])]
        first = build(job.SliceOp, [value], None, None, what, start=[0] * value.ndim, stop=ends, step=[1] * value.ndim)
        rows = build(job.ReduceSumOp, [first], None, None, what, axes=list(range(1, value.ndim)))
    draws = build(job.RandomUniformOp, [], job.tensor((value.shape[0],), f64), f"{name}-uniform", what,
                  seed=_seed(seed, name, what))  # fmt: skip
    draws = build(job.UnpinSizeOp, [draws, rows], None, None, what, axes=[0])
    return build(job.TopKOp, [draws], None, name, what, axis=0, k=value.shape[0])
