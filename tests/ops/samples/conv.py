"""Convolution samples against direct loop references (slow, obvious, independent of im2col)."""
import numpy as np

from ..sample import Sample, rnd


def _padded(x, padding):
    (pt, pb), (pl, pr) = padding
    return np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))


def ref_conv2d(x, w, stride, padding, dilation, groups):
    xp = _padded(x, padding)
    n, c, h, wd = xp.shape
    cout, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    ho, wo = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, cout, ho, wo))
    per_group = cout // groups
    for o in range(cout):
        g = o // per_group
        for i in range(ho):
            for j in range(wo):
                for a in range(kh):
                    for b in range(kw):
                        patch = xp[:, g * cg:(g + 1) * cg, i * sh + a * dh, j * sw + b * dw]
                        out[:, o, i, j] += patch @ w[o, :, a, b]
    return out


def ref_conv_transpose2d(x, w, stride, padding, dilation, groups, output_padding):
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    (sh, sw), (dh, dw), ((pt, pb), (pl, pr)) = stride, dilation, padding
    ho = (h - 1) * sh - pt - pb + dh * (kh - 1) + output_padding[0] + 1
    wo = (wd - 1) * sw - pl - pr + dw * (kw - 1) + output_padding[1] + 1
    out = np.zeros((n, cog * groups, ho, wo))
    cig = cin // groups
    for ci in range(cin):
        g = ci // cig
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for b in range(kw):
                        oi, oj = i * sh + a * dh - pt, j * sw + b * dw - pl
                        if 0 <= oi < ho and 0 <= oj < wo:
                            out[:, g * cog:(g + 1) * cog, oi, oj] += \
                                x[:, ci, i, j][:, None] * w[ci, :, a, b]
    return out


def ref_conv2d_weight(x, g, kernel_size, stride, padding, dilation, groups):
    xp = _padded(x, padding)
    n, cin = x.shape[:2]
    cout, ho, wo = g.shape[1:]
    (kh, kw), (sh, sw), (dh, dw) = kernel_size, stride, dilation
    cg, per_group = cin // groups, cout // groups
    gw = np.zeros((cout, cg, kh, kw))
    for o in range(cout):
        grp = o // per_group
        for a in range(kh):
            for b in range(kw):
                rows = xp[:, grp * cg:(grp + 1) * cg, a * dh:a * dh + (ho - 1) * sh + 1:sh,
                          b * dw:b * dw + (wo - 1) * sw + 1:sw]
                gw[o, :, a, b] = np.einsum("ncij,nij->c", rows, g[:, o])
    return gw


def _geo(stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1):
    return dict(stride=stride, padding=padding, dilation=dilation, groups=groups)


_STRIDED = _geo((2, 1), ((1, 0), (2, 1)), (1, 2), 2)

SAMPLES = {
    "conv2d": [
        Sample((rnd(1, 2, 5, 5), rnd(3, 2, 3, 3, seed=1)), _geo(), ref_conv2d, label="plain"),
        Sample((rnd(2, 4, 6, 5), rnd(4, 2, 2, 3, seed=1)), _STRIDED, ref_conv2d,
               label="strided-grouped-dilated-asymmetric"),
        Sample((rnd(1, 2, 4, 4), rnd(2, 1, 3, 3, seed=1)), _geo((2, 2), ((1, 1), (1, 1)), groups=2),
               ref_conv2d, label="depthwise"),
        Sample((rnd(0, 2, 4, 4), rnd(3, 2, 3, 3, seed=1)), _geo(), ref_conv2d, label="empty-batch"),
    ],
    "conv_transpose2d": [
        Sample((rnd(1, 2, 3, 3), rnd(2, 3, 3, 3, seed=1)), dict(_geo(), output_padding=(0, 0)),
               ref_conv_transpose2d, label="plain"),
        Sample((rnd(2, 4, 3, 2), rnd(4, 1, 3, 2, seed=1)),
               dict(_geo((2, 3), ((1, 0), (0, 2)), (1, 2), 2), output_padding=(1, 2)),
               ref_conv_transpose2d, label="strided-grouped-dilated-outpad"),
        Sample((rnd(0, 2, 3, 3), rnd(2, 3, 2, 2, seed=1)), dict(_geo(), output_padding=(0, 0)),
               ref_conv_transpose2d, label="empty-batch"),
    ],
    "conv2d_weight": [
        Sample((rnd(1, 2, 5, 5), rnd(1, 3, 3, 3, seed=1)), dict(_geo(), kernel_size=(3, 3)),
               ref_conv2d_weight, label="plain"),
        Sample((rnd(2, 4, 6, 5), rnd(2, 4, 3, 4, seed=1)), dict(_STRIDED, kernel_size=(2, 3)),
               ref_conv2d_weight, label="strided-grouped-dilated-asymmetric"),
        Sample((rnd(1, 2, 6, 6), rnd(1, 2, 3, 3, seed=1)),
               dict(_geo((2, 2), ((1, 1), (1, 1))), kernel_size=(3, 3)), ref_conv2d_weight,
               label="stride-leaves-a-remainder"),
    ],
}
