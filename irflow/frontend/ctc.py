"""Connectionist temporal classification: OneFlow's flow.ctc_loss and flow.nn.ctc_greedy_decoder.

log_probs is (frames, batch, classes), log probabilities (flow.nn.logsoftmax of the logits); targets is
(batch, S), each row's first target_lengths[n] entries its labels; input_lengths gives each sequence's
frames. The loss per sequence is job.ctc_loss (the kernels in runtime/kernels/ctc.py), reduced here as
OneFlow reduces it.
"""

from __future__ import annotations

import numpy as np

from irflow.dialects import job
from irflow.frontend import dtypes, math
from irflow.frontend.blob import Blob, expect_blobs
from irflow.frontend.locations import fail
from irflow.frontend.ops import cast, constant, reshape, where
from irflow.frontend.tracing import build

_REDUCTIONS = ("none", "mean", "sum")


def ctc_loss(
    log_probs: Blob,
    targets: Blob,
    input_lengths: Blob,
    target_lengths: Blob,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
    name: str | None = None,
) -> Blob:
    """flow.ctc_loss: the negative log likelihood of each target given its sequence, as OneFlow's and PyTorch's.

    reduction "none" gives it per sequence, "sum" their sum, "mean" (the default) the mean over the batch of
    each divided by its target length (at least 1). A target no alignment fits (too few frames) has an
    infinite loss, 0 with `zero_infinity` (its gradient too). Lengths and labels are checked when the step
    runs: an ExecutionError at this line names the first one at fault.
    """
    what = "flow.ctc_loss"
    expect_blobs(what, log_probs=log_probs, targets=targets, input_lengths=input_lengths, target_lengths=target_lengths)
    if not dtypes.is_int(blank):
        fail(f"{what}: blank must be an int, got {blank!r}")
    if reduction not in _REDUCTIONS:
        fail(f"{what}: reduction must be one of {', '.join(map(repr, _REDUCTIONS))}, got {reduction!r}")
    loss = build(job.CtcLossOp, [log_probs, targets, input_lengths, target_lengths], None, None if reduction != "none"
                 else name, what, blank=int(blank), zero_infinity=bool(zero_infinity))  # fmt: skip
    if reduction == "sum":
        return math.reduce_sum(loss, name=name)
    if reduction == "mean":
        per_label = math.maximum(cast(target_lengths, log_probs.dtype), 1.0)
        return math.reduce_mean(loss / per_label, name=name)
    return loss


def ctc_greedy_decoder(
    log_probs: Blob, input_lengths: Blob, merge_repeated: bool = True, name: str | None = None
) -> tuple[Blob, Blob]:
    """flow.nn.ctc_greedy_decoder: the best path of each sequence, as OneFlow's decoder gives it.

    decoded (batch, frames) int64 holds the most likely class of each frame, without the blank, which this
    decoder takes to be the last class (OneFlow's kernel), a run of one class once with `merge_repeated`,
    and 0 past the decoded length; neg_sum_logits (batch, 1) is minus the sum of each frame's largest log
    probability over the sequence's frames.
    """
    what = "flow.nn.ctc_greedy_decoder"
    expect_blobs(what, log_probs=log_probs, input_lengths=input_lengths)
    decoded = build(job.CtcGreedyDecodeOp, [log_probs, input_lengths], None, name, what, merge_repeated=bool(merge_repeated))
    frames, batch = log_probs.shape[:2]
    frame = constant(np.arange(frames, dtype=np.int64).reshape(frames, 1))
    inside = math.less(frame, reshape(cast(input_lengths, dtypes.int64), (1, batch)))
    best = where(inside, math.reduce_max(log_probs, axis=2), 0.0)
    return decoded, reshape(-math.reduce_sum(best, axis=0), (batch, 1))
