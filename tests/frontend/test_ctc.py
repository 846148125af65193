"""flow.ctc_loss and flow.nn.ctc_greedy_decoder against PyTorch's ctc_loss (values and gradients) and
OneFlow's documented examples."""

from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle; skipped where PyTorch is not installed (CI installs it)

import test_composite_ops as _checks  # on pytest's pythonpath (pyproject.toml)
from predict_jobs import on_one_device_and  # noqa: E402

check, FLOATS = _checks.check, _checks.FLOATS


def batch(blank=0, classes=5, frames=8):
    """4 sequences: full length, shorter, an empty target, a repeated label that needs a blank between."""
    rng = np.random.default_rng(blank)
    labels = [c for c in range(classes) if c != blank]
    targets = rng.choice(labels, (4, 4)).astype(np.int64)
    targets[3, 1] = targets[3, 0]
    return (rng.normal(size=(frames, 4, classes)), targets, np.array([frames, 6, 3, 7]), np.array([4, 2, 0, 3]))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("blank", [0, 2])
def test_ctc_loss_and_its_gradient_are_pytorchs(dtype, reduction, blank):
    logits, targets, frames, labels = batch(blank)
    logits = logits.astype(dtype.np_dtype)

    def ours(x, t, il, tl):
        return flow.ctc_loss(flow.nn.logsoftmax(x, axis=2), t, il, tl, blank=blank, reduction=reduction)

    def theirs(x, t, il, tl):
        return torch.nn.functional.ctc_loss(torch.log_softmax(x, dim=2), t, il, tl, blank=blank, reduction=reduction)

    check(ours, theirs, [logits, targets, frames, labels], dtype, atol=1e-5 if dtype is flow.float32 else None)


def test_oneflows_documented_values():
    log_probs = np.array([
        [[-1.1031, -0.7998, -1.5200], [-0.9808, -1.1363, -1.1908]], [[-1.2258, -1.0665, -1.0153], [-1.1135, -1.2331, -0.9671]],
        [[-1.3348, -0.6611, -1.5118], [-0.9823, -1.2355, -1.0941]], [[-1.3850, -1.3273, -0.7247], [-0.8235, -1.4783, -1.0994]],
        [[-0.9049, -0.8867, -1.6962], [-1.4938, -1.3630, -0.6547]]], np.float32)  # fmt: skip
    scores = np.array([
        [[-1.54, -1.20, -1.95, -1.65, -1.81], [-1.84, -1.74, -1.58, -1.55, -1.12]],
        [[-1.68, -1.48, -1.89, -1.30, -2.07], [-1.13, -1.45, -1.24, -1.61, -1.66]],
        [[-1.56, -1.40, -2.83, -1.67, -1.48], [-1.20, -2.01, -2.05, -1.95, -1.24]],
        [[-2.09, -1.76, -1.36, -1.67, -1.45], [-1.85, -1.48, -1.34, -2.16, -1.55]]], np.float32)  # fmt: skip

    @flow.global_function()
    def job(lp: tp.Numpy.Placeholder((5, 2, 3)), t: tp.Numpy.Placeholder((2, 3), dtype=flow.int32),
            il: tp.Numpy.Placeholder((2,), dtype=flow.int32), tl: tp.Numpy.Placeholder((2,), dtype=flow.int32),
            s: tp.Numpy.Placeholder((4, 2, 5)), sl: tp.Numpy.Placeholder((2,), dtype=flow.int64)
            ) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:  # fmt: skip
        decoded, neg_sum_logits = flow.nn.ctc_greedy_decoder(s, sl, merge_repeated=True)
        return flow.ctc_loss(lp, t, il, tl, blank=0, reduction="none"), decoded, neg_sum_logits

    loss, decoded, neg = job(log_probs, np.array([[1, 2, 2], [1, 2, 2]], np.int32), np.array([5, 5], np.int32),
                             np.array([3, 3], np.int32), scores, np.array([4, 4]))  # fmt: skip
    np.testing.assert_allclose(loss, [3.918017, 2.907672], rtol=1e-6)
    np.testing.assert_array_equal(decoded, [[1, 3, 1, 2], [0, 2, 0, 0]])  # the last class is the blank
    np.testing.assert_allclose(neg, [[5.26], [4.79]], rtol=1e-6)


def test_greedy_decoding_keeps_repeats_when_asked_and_stops_at_each_length():
    best = np.array([[1, 1, 3, 1, 1, 2], [2, 2, 2, 1, 3, 3]])  # (batch, frames); class 3 of 4 is the blank
    scores = np.where(np.arange(4)[None, None, :] == best.T[:, :, None], 0.0, -3.0).astype(np.float32)

    @flow.global_function()
    def job(s: tp.Numpy.Placeholder((6, 2, 4)), lengths: tp.Numpy.Placeholder((2,), dtype=flow.int64)
            ) -> Tuple[tp.Numpy, tp.Numpy]:  # fmt: skip
        return flow.nn.ctc_greedy_decoder(s, lengths)[0], flow.nn.ctc_greedy_decoder(s, lengths, merge_repeated=False)[0]

    merged, kept = job(scores, np.array([6, 4]))
    np.testing.assert_array_equal(merged, [[1, 1, 2, 0, 0, 0], [2, 1, 0, 0, 0, 0]])
    np.testing.assert_array_equal(kept, [[1, 1, 1, 1, 2, 0], [2, 2, 2, 1, 0, 0]])


def test_an_unreachable_target_is_infinite_or_zero_with_zero_infinity():
    logits, targets, _, labels = batch()
    frames = np.array([8, 6, 3, 2])  # the last sequence's 3 labels, one repeated, need 4 frames
    lp = torch.log_softmax(torch.tensor(logits), dim=2).numpy()

    @flow.global_function()
    def losses(x: tp.Numpy.Placeholder(lp.shape, dtype=flow.double), t: tp.Numpy.Placeholder((4, 4), dtype=flow.int64),
               il: tp.Numpy.Placeholder((4,), dtype=flow.int64), tl: tp.Numpy.Placeholder((4,), dtype=flow.int64)
               ) -> Tuple[tp.Numpy, tp.Numpy]:  # fmt: skip
        return (flow.ctc_loss(x, t, il, tl, reduction="none"),
                flow.ctc_loss(x, t, il, tl, reduction="none", zero_infinity=True))  # fmt: skip

    plain, zeroed = losses(lp, targets, frames, labels)
    assert np.isinf(plain[3]) and zeroed[3] == 0 and np.isfinite(plain[:3]).all()
    np.testing.assert_array_equal(zeroed[:3], plain[:3])
    (_, (grad, *_)) = check(lambda x, t, il, tl: flow.ctc_loss(x, t, il, tl, reduction="none", zero_infinity=True),
                            lambda x, t, il, tl: torch.nn.functional.ctc_loss(x, t, il, tl, reduction="none",
                                                                              zero_infinity=True),
                            [lp, targets, frames, labels], flow.float64)  # fmt: skip
    assert (grad[:, 3] == 0).all()


@pytest.mark.parametrize("change, match", [
    (lambda t, il, tl: (t, il, np.array([4, 2, 0, 5])), "target length 5 of sequence 3 is outside \\[0, 4\\]"),
    (lambda t, il, tl: (t, np.array([8, 9, 3, 7]), tl), "input length 9 of sequence 1 is outside \\[0, 8\\]"),
    (lambda t, il, tl: (np.where(np.arange(4) == 1, 0, t), il, tl), "target 0 at position \\[0, 1\\] is not a label"),
])  # fmt: skip
def test_bad_lengths_and_labels_stop_the_step_at_the_users_line(change, match):
    logits, targets, frames, labels = batch()

    @flow.global_function()
    def loss(x: tp.Numpy.Placeholder(logits.shape, dtype=flow.double), t: tp.Numpy.Placeholder((4, 4), dtype=flow.int64),
             il: tp.Numpy.Placeholder((4,), dtype=flow.int64), tl: tp.Numpy.Placeholder((4,), dtype=flow.int64)
             ) -> tp.Numpy:  # fmt: skip
        return flow.ctc_loss(x, t, il, tl)

    with pytest.raises(flow.ExecutionError, match=r"test_ctc.py:\d+.*ctc_loss: " + match):
        loss(logits, *change(targets, frames, labels))


def test_training_with_the_batch_split_over_two_devices_is_one_devices():
    logits, targets, frames, labels = batch()
    x = logits.astype(np.float32)

    def train():
        @flow.global_function(type="train")
        def step(a: tp.Numpy.Placeholder(x.shape), t: tp.Numpy.Placeholder((4, 4), dtype=flow.int64),
                 il: tp.Numpy.Placeholder((4,), dtype=flow.int64), tl: tp.Numpy.Placeholder((4,), dtype=flow.int64)
                 ) -> tp.Numpy:  # fmt: skip
            w = flow.get_variable("w", shape=(5,), initializer=flow.ones_initializer())
            scores = flow.nn.logsoftmax(a.with_distribute(flow.distribute.split(1)) * w, axis=2)
            loss = flow.ctc_loss(scores, t, il, tl)
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5]), momentum=0).minimize(loss)
            return loss

        return [step(x, targets, frames, labels) for _ in range(3)], flow.get_all_variables()["w"].numpy()

    one, two = on_one_device_and(2, train)
    np.testing.assert_allclose(two[0], one[0], rtol=1e-5)
    np.testing.assert_allclose(two[1], one[1], rtol=1e-5)
