"""cross_entropy and its backward op against the textbook formulas (float64 NumPy); the op's
second output, which its backward reads, is the softmax."""
import numpy as np

from ..sample import Sample, ints, rnd
from .normalization import ref_log_softmax, ref_softmax


def _counted(target, ignore_index):
    """The rows that count, and the targets with ignored ones set to class 0."""
    valid = target != ignore_index
    return valid, np.where(valid, target, 0)


def ref_cross_entropy(x, target, ignore_index, reduction):
    logp = ref_log_softmax(x, 1)
    valid, safe = _counted(target, ignore_index)
    loss = np.where(valid, -logp[np.arange(len(target)), safe], 0.0)
    if reduction == "none":
        return loss, np.exp(logp)
    return (loss.sum() if reduction == "sum" else loss.sum() / valid.sum()), np.exp(logp)


def ref_binary_cross_entropy(x, y):
    with np.errstate(divide="ignore"):
        return -(y * np.maximum(np.log(x), -100.0) + (1 - y) * np.maximum(np.log1p(-x), -100.0))


def ref_cross_entropy_backward(g, prob, target, ignore_index, reduction):
    valid, safe = _counted(target, ignore_index)
    onehot = np.eye(prob.shape[1])[safe]
    if reduction == "none":
        scale = g[:, None]
    else:
        scale = g / max(valid.sum(), 1) if reduction == "mean" else g
    return (prob - onehot) * valid[:, None] * scale


def _attrs(reduction, ignore_index=-100):
    return {"ignore_index": ignore_index, "reduction": reduction}


_T = np.array([0, -100, 4, 2, -100])      # two rows ignored by the default ignore_index
_IN_RANGE = np.array([1, 0, 1, 3])        # ignore_index=1: a class index that is ignored

SAMPLES = {
    "cross_entropy": [
        Sample((rnd(6, 5), ints(6)), _attrs("mean"), ref_cross_entropy, label="mean"),
        Sample((rnd(5, 5), _T), _attrs("mean"), ref_cross_entropy, label="mean-ignored"),
        Sample((rnd(5, 5), _T), _attrs("sum"), ref_cross_entropy, label="sum-ignored"),
        Sample((rnd(4, 4), _IN_RANGE), _attrs("none", 1), ref_cross_entropy,
               label="none-ignore-a-class"),
        Sample((rnd(3, 4, low=400.0, high=900.0), ints(3, high=4, dtype=np.int32)),
               _attrs("sum"), ref_cross_entropy, label="large-values-int32"),
        Sample((rnd(1, 1), np.array([0])), _attrs("mean"), ref_cross_entropy,
               label="one-class"),
    ],
    "cross_entropy_backward": [
        Sample((rnd(), ref_softmax(rnd(5, 5), 1), _T), _attrs("mean"),
               ref_cross_entropy_backward, label="mean-ignored"),
        Sample((rnd(), ref_softmax(rnd(6, 3), 1), ints(6, high=3)), _attrs("sum"),
               ref_cross_entropy_backward, label="sum"),
        Sample((rnd(4), ref_softmax(rnd(4, 4), 1), _IN_RANGE), _attrs("none", 1),
               ref_cross_entropy_backward, label="none-ignore-a-class"),
    ],
    "binary_cross_entropy": [
        Sample((rnd(3, 4, low=0.05, high=0.95), rnd(3, 4, seed=1, low=0.0, high=1.0)), {},
               ref_binary_cross_entropy, label="soft-targets"),
        Sample((rnd(4, low=0.05, high=0.95), rnd(1, seed=2, low=0.0, high=1.0)), {},
               ref_binary_cross_entropy, label="broadcast"),
        Sample((np.array([1e-60, 1.0, 0.5]), np.array([1.0, 0.0, 1.0])), {},
               ref_binary_cross_entropy, grad=False, label="log-floor"),
    ],
}
