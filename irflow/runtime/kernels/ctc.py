"""Connectionist temporal classification (Graves et al., 2006): the loss, its gradient, greedy decoding.

    ctc_loss (log_probs, targets, input_lengths, target_lengths) -> loss {blank, zero_infinity}
    ctc_loss_grad (dloss, log_probs, targets, input_lengths, target_lengths) -> dlog_probs {blank, zero_infinity}
    ctc_greedy_decode (log_probs, input_lengths) -> decoded {merge_repeated}

log_probs is (T, N, C), targets (N, S) padded past each target length. The loss sums, in log space,
over the alignments of each target extended with blanks (blank, l1, blank, l2, ..., blank: L = 2S + 1
states) by the forward variables alpha; the gradient takes the backward variables beta too and is
OneFlow's and PyTorch's: exp(lp) - occupancy(c) / exp(lp) per frame and class, the gradient with
respect to the logits once it goes through log_softmax. Both recurrences run over time in float64,
one vectorized step per frame over the batch and the states; the gradient computes alpha again
rather than keeping it from the forward step. Lengths and labels are checked before anything is
written (a DataError names the first one at fault).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from .registry import Array, DataError, Run, register


class _Alignments:
    """The extended targets of a batch and what the recurrences need of them, at one call's values."""

    def __init__(self, xp: ModuleType, attrs: Mapping[str, Any], log_probs: Array, targets: Array,
                 input_lengths: Array, target_lengths: Array, kernel: str) -> None:  # fmt: skip
        self.xp, self.blank = xp, int(attrs.get("blank", 0))
        frames, batch, classes = log_probs.shape
        self.lengths, self.target_lengths = input_lengths.astype(np.int64), target_lengths.astype(np.int64)
        _check(xp, self.lengths, self.target_lengths, targets, frames, classes, self.blank, kernel)
        states = 2 * targets.shape[1] + 1
        self.extended = xp.full((batch, states), self.blank, np.int64)
        self.extended[:, 1::2] = xp.clip(targets, 0, classes - 1)  # padding past a length: any class, never read
        lp = log_probs.astype(np.float64)
        self.emit = xp.take_along_axis(lp, xp.broadcast_to(self.extended[None], (frames, batch, states)), axis=2)
        self.skip = xp.zeros((batch, states), bool)  # state s may follow s - 2: a label unlike the one before
        self.skip[:, 2:] = (self.extended[:, 2:] != self.blank) & (self.extended[:, 2:] != self.extended[:, :-2])
        self.last = 2 * self.target_lengths  # each target's final blank state

    def alpha(self) -> Array:
        """log alpha (T, N, L): the log probability of the alignments' prefixes ending at each state."""
        xp, emit = self.xp, self.emit
        alpha = xp.full(emit.shape, -np.inf)
        alpha[0, :, :2] = emit[0, :, :2]
        for t in range(1, emit.shape[0]):
            before = alpha[t - 1]
            alpha[t] = _logsumexp3(xp, before, _shifted(xp, before, 1), xp.where(self.skip, _shifted(xp, before, 2), -np.inf))
            alpha[t] += emit[t]
        return alpha

    def beta(self) -> Array:
        """log beta (T, N, L): of the suffixes from each state to each sequence's end, its own last frame."""
        xp, emit = self.xp, self.emit
        frames, batch, states = emit.shape
        beta = xp.full(emit.shape, -np.inf)
        rows = xp.arange(batch)
        # where state s + 2 may follow s: the skip of s + 2
        ahead = xp.zeros((batch, states), bool)
        ahead[:, :-2] = self.skip[:, 2:]
        for t in range(frames - 1, -1, -1):
            step = beta[t]
            if t + 1 < frames:
                after = beta[t + 1]
                step[...] = _logsumexp3(xp, after, _shifted(xp, after, -1), xp.where(ahead, _shifted(xp, after, -2), -np.inf))
                step += emit[t]
            ending = self.lengths == t + 1  # the sequences whose last frame is t start here
            step[ending] = -np.inf
            n = rows[ending]
            step[n, self.last[n]] = emit[t, n, self.last[n]]
            labelled = n[self.target_lengths[n] > 0]
            step[labelled, self.last[labelled] - 1] = emit[t, labelled, self.last[labelled] - 1]
            step[self.lengths <= t] = -np.inf  # past a sequence's end
        return beta

    def nll(self, alpha: Array) -> Array:
        """-log p(target | input) per sequence: alpha at its last frame, in its final blank or last label."""
        xp = self.xp
        batch = alpha.shape[1]
        rows = xp.arange(batch)
        frame = xp.maximum(self.lengths - 1, 0)
        end = alpha[frame, rows, self.last]
        label = xp.where(self.target_lengths > 0, alpha[frame, rows, xp.maximum(self.last - 1, 0)], -np.inf)
        log_p = xp.logaddexp(end, label)
        # no frames: only the empty target is certain
        return -xp.where(self.lengths > 0, log_p, xp.where(self.target_lengths == 0, 0.0, -np.inf))


def _check(xp: ModuleType, lengths: Array, target_lengths: Array, targets: Array, frames: int, classes: int, blank: int,
           kernel: str) -> None:  # fmt: skip
    _check_lengths(xp, lengths, frames, "input length", kernel)
    _check_lengths(xp, target_lengths, targets.shape[1], "target length", kernel)
    used = xp.arange(targets.shape[1])[None, :] < target_lengths[:, None]
    bad = used & ((targets < 0) | (targets >= classes) | (targets == blank))
    if bool(bad.any()):
        n, s = (int(i) for i in np.unravel_index(int(xp.argmax(bad.reshape(-1))), bad.shape))
        raise DataError(f"{kernel}: target {int(targets[n, s])} at position [{n}, {s}] is not a label: outside "
                        f"[0, {classes}) or the blank {blank}")  # fmt: skip


def _check_lengths(xp: ModuleType, values: Array, bound: int, name: str, kernel: str) -> None:
    """A DataError naming the first sequence whose length is outside [0, bound]."""
    bad = (values < 0) | (values > bound)
    if bool(bad.any()):
        n = int(xp.argmax(bad))
        raise DataError(f"{kernel}: {name} {int(values[n])} of sequence {n} is outside [0, {bound}]")


def _shifted(xp: ModuleType, a: Array, by: int) -> Array:
    """a moved `by` states along its last axis (towards higher states for by > 0), -inf where nothing came."""
    out = xp.full(a.shape, -np.inf)
    if by > 0:
        out[:, by:] = a[:, :-by]
    else:
        out[:, :by] = a[:, -by:]
    return out


def _logsumexp3(xp: ModuleType, a: Array, b: Array, c: Array) -> Array:
    top = xp.maximum(xp.maximum(a, b), c)
    safe = xp.where(xp.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return xp.log(xp.exp(a - safe) + xp.exp(b - safe) + xp.exp(c - safe)) + safe


@register("ctc_loss", checks_data=True)
def ctc_loss(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """loss[n] = -log p(targets[n] | log_probs[:, n]); inf where no alignment fits (0 with zero_infinity)."""
    (loss,) = outs

    def run() -> None:
        paths = _Alignments(xp, attrs, *ins, "ctc_loss")
        nll = paths.nll(paths.alpha())
        if attrs.get("zero_infinity", False):
            nll = xp.where(xp.isinf(nll), 0.0, nll)
        xp.copyto(loss, nll, casting="same_kind")

    return run


@register("ctc_loss_grad", checks_data=True)
def ctc_loss_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dlog_probs[t, n, c] = dloss[n] (exp(lp) - sum over the states of class c of exp(alpha + beta + nll - lp))
    for t below sequence n's length, else 0; 0 for an infinite loss with zero_infinity."""
    (dloss, log_probs, *rest), (dlog_probs,) = ins, outs
    classes = log_probs.shape[2]
    zero_infinity = bool(attrs.get("zero_infinity", False))

    def run() -> None:
        paths = _Alignments(xp, attrs, log_probs, *rest, "ctc_loss_grad")
        alpha, beta = paths.alpha(), paths.beta()
        nll = paths.nll(alpha)
        possible = xp.isfinite(nll)
        with np.errstate(invalid="ignore"):
            # a state's share of the alignments at a frame; 0 where it has none (-inf - -inf where lp is -inf)
            occupancy = xp.exp(alpha + beta + xp.where(possible, nll, 0.0)[None, :, None] - paths.emit)  # (T, N, L)
        occupancy = xp.where(xp.isnan(occupancy), 0.0, occupancy)
        one_hot = (paths.extended[:, :, None] == xp.arange(classes)).astype(np.float64)  # (N, L, C)
        per_class = xp.einsum("tns,nsc->tnc", occupancy, one_hot)
        grad = (xp.exp(log_probs.astype(np.float64)) - per_class) * dloss.astype(np.float64)[None, :, None]
        # no alignment: OneFlow's and PyTorch's gradient is NaN there, or 0 with zero_infinity
        grad = xp.where(possible[None, :, None], grad, 0.0 if zero_infinity else np.nan)
        frames = xp.arange(log_probs.shape[0])[:, None] < paths.lengths[None, :]
        xp.copyto(dlog_probs, xp.where(frames[:, :, None], grad, 0.0), casting="same_kind")

    return run


@register("ctc_greedy_decode", checks_data=True)
def ctc_greedy_decode(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """Each sequence's most likely class per frame, without the blank (the last class, as OneFlow's decoder
    takes it) and, with merge_repeated, with a run of one class given once; 0 past its decoded length."""
    (log_probs, input_lengths), (decoded,) = ins, outs
    frames, batch, classes = log_probs.shape
    merge = bool(attrs.get("merge_repeated", True))

    def run() -> None:
        lengths = input_lengths.astype(np.int64)
        _check_lengths(xp, lengths, frames, "input length", "ctc_greedy_decode")
        best = xp.argmax(log_probs, axis=2)  # (T, N)
        kept = (xp.arange(frames)[:, None] < lengths[None, :]) & (best != classes - 1)
        if merge:
            kept[1:] &= best[1:] != best[:-1]
        at = xp.cumsum(kept, axis=0) - 1  # each kept frame's place in its sequence's output
        t, n = xp.nonzero(kept)
        decoded.fill(0)
        decoded[n, at[t, n]] = best[t, n]

    return run
