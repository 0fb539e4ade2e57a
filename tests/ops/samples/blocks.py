"""pixel_shuffle / unshuffle and unfold / fold against NumPy loops written from PyTorch's
definitions (channel c*r*r + i*r + j <-> pixel (i, j) of a block; column c*kh*kw + i*kw + j
<-> tap (i, j) of a sliding block)."""
import numpy as np

from ..sample import Sample, rnd


def ref_shuffle(x, factor):
    *batch, c, h, w = x.shape
    r = factor
    out = np.zeros((*batch, c // (r * r), h * r, w * r), x.dtype)
    for ch in range(c):
        i, j = divmod(ch % (r * r), r)
        out[..., ch // (r * r), i::r, j::r] = x[..., ch, :, :]
    return out


def ref_unshuffle(x, factor):
    *batch, c, h, w = x.shape
    r = factor
    out = np.zeros((*batch, c * r * r, h // r, w // r), x.dtype)
    for ch in range(c * r * r):
        i, j = divmod(ch % (r * r), r)
        out[..., ch, :, :] = x[..., ch // (r * r), i::r, j::r]
    return out


def _positions(size, kernel, dilation, padding, stride):
    count = (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
    return count, [[b * stride - padding + t * dilation for b in range(count)] for t in range(kernel)]


def ref_unfold(x, kernel_size, dilation, padding, stride):
    n, c, h, w = x.shape
    lh, rows = _positions(h, kernel_size[0], dilation[0], padding[0], stride[0])
    lw, cols = _positions(w, kernel_size[1], dilation[1], padding[1], stride[1])
    out = np.zeros((n, c * kernel_size[0] * kernel_size[1], lh * lw), x.dtype)
    for ch in range(c):
        for i in range(kernel_size[0]):
            for j in range(kernel_size[1]):
                for bi, y in enumerate(rows[i]):
                    for bj, xx in enumerate(cols[j]):
                        if 0 <= y < h and 0 <= xx < w:
                            out[:, (ch * kernel_size[0] + i) * kernel_size[1] + j,
                                bi * lw + bj] = x[:, ch, y, xx]
    return out


def ref_fold(cols_in, output_size, kernel_size, dilation, padding, stride):
    n, ckk, _ = cols_in.shape
    c = ckk // (kernel_size[0] * kernel_size[1])
    h, w = output_size
    lh, rows = _positions(h, kernel_size[0], dilation[0], padding[0], stride[0])
    lw, cols = _positions(w, kernel_size[1], dilation[1], padding[1], stride[1])
    out = np.zeros((n, c, h, w), cols_in.dtype)
    for ch in range(c):
        for i in range(kernel_size[0]):
            for j in range(kernel_size[1]):
                for bi, y in enumerate(rows[i]):
                    for bj, xx in enumerate(cols[j]):
                        if 0 <= y < h and 0 <= xx < w:
                            out[:, ch, y, xx] += cols_in[:, (ch * kernel_size[0] + i) *
                                                         kernel_size[1] + j, bi * lw + bj]
    return out


def _blocks(kernel_size, dilation=(1, 1), padding=(0, 0), stride=(1, 1)):
    return dict(kernel_size=kernel_size, dilation=dilation, padding=padding, stride=stride)


_UNFOLD = [((2, 3, 4, 5), _blocks((2, 2)), "2x2"),
           ((1, 2, 5, 6), _blocks((2, 3), padding=(1, 1), stride=(2, 2)), "padded-strided"),
           ((1, 2, 7, 6), _blocks((3, 2), dilation=(2, 1), padding=(1, 0)), "dilated"),
           ((1, 1, 3, 3), _blocks((3, 3)), "one-block")]

SAMPLES = {
    "pixel_shuffle": [Sample((rnd(2, 8, 3, 2),), {"factor": 2}, ref_shuffle, label="4d"),
                      Sample((rnd(9, 2, 2),), {"factor": 3}, ref_shuffle, label="3d"),
                      Sample((rnd(2, 1, 4, 1, 3),), {"factor": 2}, ref_shuffle, label="5d")],
    "pixel_unshuffle": [Sample((rnd(2, 2, 4, 6),), {"factor": 2}, ref_unshuffle, label="4d"),
                        Sample((rnd(1, 3, 3),), {"factor": 3}, ref_unshuffle, label="3d")],
    "unfold": [Sample((rnd(*shape),), attrs, ref_unfold, label=label)
               for shape, attrs, label in _UNFOLD],
    "fold": [Sample((ref_unfold(rnd(*shape), **attrs) + 0.25,),
                    dict(attrs, output_size=shape[2:]), ref_fold, label=label)
             for shape, attrs, label in _UNFOLD],
}
