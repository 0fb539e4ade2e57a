"""interpolate samples against dense per-axis interpolation matrices (float64 NumPy, from the
PyTorch formulas written out directly)."""
import numpy as np

from ..sample import Sample, rnd


def _matrix(mode, n_in, n_out, scale, align_corners):
    """(n_out, n_in): row d holds the weights output d gives each input along one axis."""
    m = np.zeros((n_out, n_in))
    for d in range(n_out):
        if mode == "nearest":
            ratio = np.float32(1 / scale) if scale else np.float32(n_in) / np.float32(n_out)
            m[d, min(int(np.floor(np.float32(d) * ratio)), n_in - 1)] = 1
            continue
        if align_corners:
            src = d * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        elif n_in == n_out:
            src = float(d)
        else:
            src = max(((1 / scale) if scale else n_in / n_out) * (d + 0.5) - 0.5, 0.0)
        lo = min(int(np.floor(src)), n_in - 1)
        frac = min(max(src - lo, 0.0), 1.0)
        m[d, lo] += 1 - frac
        m[d, min(lo + 1, n_in - 1)] += frac
    return m


def _map(v, mode, size, scales, align_corners, input_size, transpose):
    for a in range(len(size)):
        m = _matrix(mode, input_size[a], size[a], scales[a], align_corners)
        v = np.moveaxis(np.tensordot(m.T if transpose else m, np.moveaxis(v, a + 2, 0), 1),
                        0, a + 2)
    return v


def ref_interpolate(x, mode, size, scales, align_corners):
    return _map(x, mode, size, scales, align_corners, x.shape[2:], False)


def ref_interpolate_backward(g, mode, size, scales, align_corners, input_size):
    return _map(g, mode, size, scales, align_corners, input_size, True)


def _attrs(mode, size, scales=None, align_corners=False):
    return dict(mode=mode, size=size, scales=scales or (None,) * len(size),
                align_corners=align_corners)


_CASES = [  # (input shape, attrs, label)
    ((2, 3, 5), _attrs("nearest", (8,)), "nearest-1d-up"),
    ((1, 2, 7), _attrs("nearest", (3,)), "nearest-1d-down"),
    ((2, 2, 3, 4), _attrs("nearest", (6, 8)), "nearest-2d-double"),
    ((1, 2, 4, 6), _attrs("nearest", (6, 3), (1.5, 0.5)), "nearest-2d-scales"),
    ((1, 1, 2, 3, 2), _attrs("nearest", (3, 5, 4)), "nearest-3d"),
    ((2, 3, 6), _attrs("linear", (13,)), "linear-1d"),
    ((2, 2, 3, 4), _attrs("linear", (5, 7)), "bilinear-up"),
    ((1, 2, 6, 5), _attrs("linear", (4, 2)), "bilinear-down"),
    ((1, 2, 3, 4), _attrs("linear", (5, 7), align_corners=True), "bilinear-align-corners"),
    ((1, 2, 4, 4), _attrs("linear", (6, 10), (1.5, 2.5)), "bilinear-scales"),
    ((1, 2, 4, 5), _attrs("linear", (1, 5)), "bilinear-size-1-and-same"),
    ((1, 1, 2, 3, 4), _attrs("linear", (3, 5, 2)), "trilinear"),
]

SAMPLES = {
    "interpolate": [Sample((rnd(*shape),), attrs, ref_interpolate, label=label)
                    for shape, attrs, label in _CASES],
    "interpolate_backward": [
        Sample((rnd(*shape[:2], *attrs["size"]),), dict(attrs, input_size=shape[2:]),
               ref_interpolate_backward, label=label)
        for shape, attrs, label in _CASES[1::2]],
}
