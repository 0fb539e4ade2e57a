import numpy as np

import dualflow as flow
from ..sample import Sample

_CPU = flow.device("cpu")


def _frequencies(draws: np.ndarray, categories: int) -> np.ndarray:
    return np.bincount(draws.reshape(-1), minlength=categories) / draws.size


def _with_replacement(outs, probs, **attrs):
    """Draw frequencies follow the normalised weights; a zero weight is never drawn."""
    (draws,) = outs
    assert draws.shape == (attrs["num_samples"],) and draws.dtype == np.int64
    want = probs / probs.sum()
    np.testing.assert_allclose(_frequencies(draws, len(probs)), want, atol=0.03)
    assert not np.isin(draws, np.flatnonzero(probs == 0)).any()


def _rows_are_distinct(outs, probs, **attrs):
    """Without replacement every row draws distinct categories, the positive weights first."""
    (draws,) = outs
    assert draws.shape == probs.shape[:-1] + (attrs["num_samples"],)
    for row, w in zip(draws, probs):
        assert len(set(row.tolist())) == len(row)
        positive = int((w > 0).sum())
        assert set(row[:positive].tolist()) == set(np.flatnonzero(w > 0).tolist())


def _sequential_draws(outs, probs, **attrs):
    """Weights (1, 2, 7): the first draw is category i with probability w_i / 10; the second is
    category 0 with probability 0.2 * 1/8 + 0.7 * 1/3 (the first took 1 or 2)."""
    (draws,) = outs
    np.testing.assert_allclose(_frequencies(draws[:, 0], 3), [0.1, 0.2, 0.7], atol=0.03)
    assert abs((draws[:, 1] == 0).mean() - (0.2 / 8 + 0.7 / 3)) < 0.03
    assert (draws[:, 0] != draws[:, 1]).all()


def _multinomial(probs, num_samples, replacement, check, label):
    return Sample((probs,), {"num_samples": num_samples, "replacement": replacement,
                             "device": _CPU}, check=check, label=label)


SAMPLES = {
    "multinomial": [
        _multinomial(np.array([0.1, 0.0, 0.6, 0.3]), 4000, True, _with_replacement,
                     "with-replacement"),
        _multinomial(np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 5.0, 0.0, 1.0]]), 4, False,
                     _rows_are_distinct, "without-replacement-rows"),
        _multinomial(np.tile([[1.0, 2.0, 7.0]], (3000, 1)), 2, False, _sequential_draws,
                     "without-replacement-sequential"),
    ],
}
