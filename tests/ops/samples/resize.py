"""interpolate samples against dense per-axis interpolation matrices (float64 NumPy, from the
PyTorch formulas written out directly)."""
import numpy as np

from ..sample import Sample, rnd


def _cubic(x, a):
    """The cubic-convolution kernel (Keys) at distance x with coefficient a."""
    x = abs(x)
    if x <= 1:
        return (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1
    return a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a if x < 2 else 0.0


def _scale(n_in, n_out, scale, align_corners):
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1 / scale if scale else n_in / n_out


def _filtered_row(mode, n_in, d, ratio):
    """Antialiased resampling: the filter (triangle, or cubic a = -0.5) centred on output d's
    centre, stretched by the downscaling factor over the inputs within its support,
    normalized to sum to one."""
    cubic = mode == "cubic-aa"
    stretch = max(ratio, 1.0)
    centre = ratio * (d + 0.5)
    support = (2.0 if cubic else 1.0) * stretch
    row = np.zeros(n_in)
    for j in range(max(int(centre - support + 0.5), 0), min(int(centre + support + 0.5), n_in)):
        x = (j - centre + 0.5) / stretch
        row[j] = _cubic(x, -0.5) if cubic else max(0.0, 1 - abs(x))
    return row / row.sum() if row.sum() else row


def _matrix(mode, n_in, n_out, scale, align_corners):
    """(n_out, n_in): row d holds the weights output d gives each input along one axis."""
    m = np.zeros((n_out, n_in))
    for d in range(n_out):
        if mode == "nearest-exact":
            ratio = np.float32(1 / scale) if scale else np.float32(n_in) / np.float32(n_out)
            m[d, min(int(np.floor(np.float32(d + 0.5) * ratio)), n_in - 1)] = 1
            continue
        if mode == "cubic":   # taps past the edge read the edge
            ratio = _scale(n_in, n_out, scale, align_corners)
            src = d * ratio if align_corners else ratio * (d + 0.5) - 0.5
            lo = int(np.floor(src))
            for k in (-1, 0, 1, 2):
                m[d, min(max(lo + k, 0), n_in - 1)] += _cubic(src - (lo + k), -0.75)
            continue
        if mode.endswith("-aa"):
            m[d] = _filtered_row(mode, n_in, d, _scale(n_in, n_out, scale, align_corners))
            continue
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
    ((2, 3, 9), _attrs("nearest-exact", (4,)), "nearest-exact-1d-down"),
    ((1, 2, 3, 4), _attrs("nearest-exact", (7, 6), (2.5, 1.5)), "nearest-exact-2d-scales"),
    ((1, 2, 4, 5), _attrs("cubic", (7, 3)), "bicubic"),
    ((1, 2, 4, 3), _attrs("cubic", (5, 8), align_corners=True), "bicubic-align-corners"),
    ((1, 2, 4, 4), _attrs("cubic", (6, 10), (1.5, 2.5)), "bicubic-scales"),
    ((1, 2, 9, 7), _attrs("linear-aa", (4, 3)), "bilinear-antialias-down"),
    ((1, 2, 9, 4), _attrs("linear-aa", (3, 6)), "bilinear-antialias-mixed"),
    ((1, 2, 11, 8), _attrs("cubic-aa", (4, 3)), "bicubic-antialias-down"),
    ((1, 2, 9, 7), _attrs("cubic-aa", (3, 3), (0.4, 0.45)), "bicubic-antialias-scales"),
    ((1, 2, 9, 7), _attrs("linear-aa", (4, 2), align_corners=True), "bilinear-antialias-corners"),
]

SAMPLES = {
    "interpolate": [Sample((rnd(*shape),), attrs, ref_interpolate, label=label)
                    for shape, attrs, label in _CASES],
    "interpolate_backward": [
        Sample((rnd(*shape[:2], *attrs["size"]),), dict(attrs, input_size=shape[2:]),
               ref_interpolate_backward, label=label)
        for shape, attrs, label in _CASES[1::2]],
}
