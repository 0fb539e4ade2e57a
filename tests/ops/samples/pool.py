"""Pooling samples against loop references."""
import numpy as np

from ..sample import Sample, rnd


def ref_max_pool2d(x, kernel_size, stride, padding, dilation):
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw), ((pt, pb), (pl, pr)) = kernel_size, stride, dilation, padding
    ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    values = np.full((n, c, ho, wo), -np.inf)
    indices = np.zeros((n, c, ho, wo), dtype=np.int64)
    for i in range(ho):
        for j in range(wo):
            for a in range(kh):
                for b in range(kw):
                    r, q = i * sh - pt + a * dh, j * sw - pl + b * dw
                    if 0 <= r < h and 0 <= q < w:
                        better = x[:, :, r, q] > values[:, :, i, j]
                        values[:, :, i, j] = np.where(better, x[:, :, r, q], values[:, :, i, j])
                        indices[:, :, i, j] = np.where(better, r * w + q, indices[:, :, i, j])
    return values, indices


def ref_scatter(g, indices, shape):
    out = np.zeros(shape)
    n, c = shape[:2]
    for a in range(n):
        for b in range(c):
            np.add.at(out[a, b].reshape(-1), indices[a, b].reshape(-1), g[a, b].reshape(-1))
    return out


def ref_adaptive_max_pool2d(x, output_size):
    n, c, h, w = x.shape
    values = np.zeros((n, c) + tuple(output_size))
    indices = np.zeros((n, c) + tuple(output_size), dtype=np.int64)
    for i in range(output_size[0]):
        for j in range(output_size[1]):
            r0, r1 = i * h // output_size[0], -(-(i + 1) * h // output_size[0])
            q0, q1 = j * w // output_size[1], -(-(j + 1) * w // output_size[1])
            win = x[:, :, r0:r1, q0:q1].reshape(n, c, -1)
            arg = win.argmax(axis=-1)
            values[:, :, i, j] = win.max(axis=-1)
            indices[:, :, i, j] = (r0 + arg // (q1 - q0)) * w + q0 + arg % (q1 - q0)
    return values, indices


def _pool(kernel_size=(2, 2), stride=(2, 2), padding=((0, 0), (0, 0)), dilation=(1, 1)):
    return dict(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)


_OVERLAP = _pool((3, 2), (2, 1), ((1, 2), (1, 1)), (1, 2))   # ceil-mode style extra end padding

SAMPLES = {
    "max_pool2d": [
        Sample((rnd(2, 3, 4, 4),), _pool(), ref_max_pool2d, label="2x2"),
        Sample((rnd(1, 2, 6, 5),), _OVERLAP, ref_max_pool2d, label="overlap-padded-dilated"),
        Sample((rnd(0, 2, 4, 4),), _pool(), ref_max_pool2d, label="empty-batch"),
    ],
    "adaptive_max_pool2d": [
        Sample((rnd(2, 3, 7, 5),), dict(output_size=(4, 3)), ref_adaptive_max_pool2d,
               label="uneven"),
        Sample((rnd(1, 2, 3, 5),), dict(output_size=(5, 4)), ref_adaptive_max_pool2d,
               label="overlapping-upsampled"),
        Sample((rnd(1, 2, 6, 4),), dict(output_size=(3, 2)), ref_adaptive_max_pool2d,
               label="uniform"),
    ],
    "max_pool2d_backward": [
        Sample((rnd(1, 2, 3, 3), np.array([[[[0, 1, 1], [5, 5, 4], [8, 8, 0]]] * 2])),
               dict(shape=(1, 2, 3, 3)), ref_scatter, label="overlapping-targets"),
        Sample((rnd(0, 2, 2, 2), np.zeros((0, 2, 2, 2), np.int64)), dict(shape=(0, 2, 4, 4)),
               ref_scatter, label="empty"),
    ],
}
