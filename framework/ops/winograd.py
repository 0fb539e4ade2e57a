"""Winograd F(2x2, 3x3): a stride-1, dilation-1, one-group 3x3 convolution as 16 GEMMs over
2x2 output tiles instead of one GEMM nine taps long; its input gradient (the same kind of
convolution, with the flipped kernel) runs through it too, and its weight gradient through the
adjoint transforms.

Each 4x4 input tile d and each 3x3 filter g are transformed, multiplied elementwise (summed over
input channels: 16 GEMMs of (Cout, C) by (C, tiles)) and transformed back:

    y = A^T [(G g G^T) * (B^T d B)] A      B^T = [[1, 0, -1, 0],   G = [[ 1,    0,   0  ],
                                                  [0, 1,  1, 0],        [1/2,  1/2, 1/2],
    A^T = [[1, 1,  1,  0],                        [0, -1, 1, 0],        [1/2, -1/2, 1/2],
           [0, 1, -1, -1]]                        [0, 1,  0, -1]]       [ 0,    0,   1  ]]

so 16 multiplies give 4 outputs where the direct form needs 36: 2.25x fewer flops. The
transforms are additions (G's halves are exact), so float32 results differ from the direct
sum's in the last bits: within gamma(C + 10) times the sum of the transformed magnitudes
(tests/ops/test_winograd.py holds the kernel to that bound against a float64 direct
convolution); measured on random N(0, 1) data with unit-variance outputs, the error's RMS is
1.2x (64 channels) to 2.2x (256) the direct float32 sum's, its maximum up to 1.9x. F(4x4, 3x3)
would save another 1.8x of flops, but its coefficients (up to 8 and 1/24) gave 7-14x the direct
sum's RMS error and 10-40x its maximum on the same data: not taken. Non-finite inputs give NaN
where the direct sum gives an infinity (inf - inf inside the transforms).

The input's rows and columns are split by parity once; each transform stage is then a handful
of adds over the whole flat array of a chunk of images, a tile's neighbour being the next element
or row (NCHW-shaped adds loop over rows of 2-16 tiles: measured 2-3x slower). That costs one junk
tile row and column per image, dropped by the output transform. Images run in chunks whose
transformed tiles stay in a core's L2 cache through the transform, the GEMMs and the inverse
(8x64x32x32: 13.5 -> 9.0 ms). The same kernel runs on NumPy and CuPy, in eager and compiled
modes alike.
"""
from __future__ import annotations

from ..cpu_threads import block_threads


# When F(2x2, 3x3) is taken: measured against im2col on float32 and float64, one thread
# (kernel alone, medians of 11 interleaved runs; ratios Winograd / im2col, float32): it wins
# from ~2048 output positions over the batch (8x64x16x16 0.77, 32x64x8x8 0.71, 2x64x32x32
# 0.94, 32x256x8x8 0.80) and loses below (8x128x8x8 1.07, 1x64x32x32 1.03, 4x64x16x16 0.93 at
# the edge), on 4x4 images (128x128x4x4 0.96, 64x512x4x4 1.98: the junk column is half the
# GEMM), on 16 channels (32x16x16x16 1.18) and on 512 (32x512x8x8 1.25: the filter transform
# leaves the cache and each chunk's GEMM is a thin one). Fixed costs (the filter transform, a
# Python call per stage and chunk) need enough tiles to pay for themselves.
# Threads: the transforms are NumPy loops on one thread and the tiles' GEMMs are too small for
# the BLAS to split, so the path runs as fast on any thread count while im2col's one GEMM
# speeds up with each. At 2 threads (wall time, this shared 2-core machine, noisy) it still won
# on images up to 16x16 (8x64x16x16 0.75-0.93, 8x128x16x16 0.84, 32x64x8x8 0.64-0.74) and
# lost on 32x32 (8x64x32x32 forward 1.10, weight gradient 1.13). From 3 threads (this machine
# has 2 cores to measure on) it is not taken: im2col's GEMM keeps gaining, the path does not.
MAX_THREADS = 2
MAX_SIDE_AT_2_THREADS = 16
MIN_SIDE = 8           # output rows and columns
MIN_POSITIONS = 2048   # output positions over the batch
MIN_CHANNELS = 32      # input and output channels (the GEMMs' sides)
MAX_CHANNELS = 256
# one image's transformed tiles: more spill out of a core's L2 cache (1x64x64x64: 1.03)
MAX_IMAGE_BYTES = 2 << 20


def winograd_chosen(x, kernel, channels_out: int, stride, dilation, groups, grid) -> bool:
    """Whether the convolution of x with a `kernel`-sized filter bank of `channels_out` filters,
    output grid (Ho, Wo), runs as F(2x2, 3x3) (its forward or its weight gradient): a 3x3
    kernel at stride 1, dilation 1, one group, float32/float64, at a size where it measured
    faster."""
    if tuple(kernel) != (3, 3) or tuple(stride) != (1, 1) or tuple(dilation) != (1, 1) or \
            groups != 1 or x.dtype.char not in "fd":
        return False
    threads = block_threads()
    if threads > MAX_THREADS or (threads > 1 and max(grid) > MAX_SIDE_AT_2_THREADS):
        return False
    n, c = x.shape[:2]
    return min(grid) >= MIN_SIDE and n * grid[0] * grid[1] >= MIN_POSITIONS and \
        MIN_CHANNELS <= min(c, channels_out) and max(c, channels_out) <= MAX_CHANNELS and \
        _image_bytes(c, output_tiles(grid), x.itemsize) <= MAX_IMAGE_BYTES


# The weight gradient's 16 GEMMs reduce over the tiles where im2col's one GEMM reduces over
# all positions, and its two transforms cost more than im2col's copy: it gained only on larger
# images (float32, weight gradient / im2col's: 8x64x32x32 0.76, 2x64x32x32 0.93, 8x128x16x16
# 0.90, 8x64x16x16 1.00-1.07, 32x64x8x8 1.01-1.03, 32x256x8x8 1.08-1.70)
MIN_SIDE_WEIGHT_GRADIENT = 32


def winograd_weight_chosen(x, kernel, channels_out: int, stride, dilation, groups,
                           grid) -> bool:
    """Whether conv2d's weight gradient runs as F(2x2, 3x3): the forward's case, on outputs
    of at least MIN_SIDE_WEIGHT_GRADIENT rows and columns, on one thread."""
    return min(grid) >= MIN_SIDE_WEIGHT_GRADIENT and block_threads() == 1 and \
        winograd_chosen(x, kernel, channels_out, stride, dilation, groups, grid)


def _image_bytes(channels: int, tiles: tuple, itemsize: int) -> int:
    """Bytes of one image's transformed tiles, the junk column included."""
    return 16 * channels * tiles[0] * (tiles[1] + 1) * itemsize


def output_tiles(out_size: tuple) -> tuple:
    """2x2 tiles covering an (Ho, Wo) output: (ceil(Ho / 2), ceil(Wo / 2))."""
    return tuple((s + 1) // 2 for s in out_size)


def _tile_transform(xp, d0, d1, d2, d3, out) -> None:
    """B^T across one axis of tiles of 4: (d0 - d2, d1 + d2, d2 - d1, d1 - d3) into out[0..3]."""
    xp.subtract(d0, d2, out=out[0])
    xp.add(d1, d2, out=out[1])
    xp.subtract(d2, d1, out=out[2])
    xp.subtract(d1, d3, out=out[3])


def _split_parities(xp, x, padding, tiles):
    """The zero-padded input with rows and columns split by parity, as (2, 2, C, N, th+1, tw+1):
    padded[2r + a, 2q + b] at [a, b, :, :, r, q]. A tile's four rows (columns) are then two
    parities at two neighbouring places."""
    n, c, h, w = x.shape
    (pt, _), (pl, _) = padding
    th, tw = tiles
    out = xp.zeros((2, 2, c, n, th + 1, tw + 1), dtype=x.dtype)
    by_channel = x.transpose(1, 0, 2, 3)
    for a in range(2):
        h0 = (a - pt) % 2  # the first input row that lands on a padded row of parity a
        r0, rows = (h0 + pt) // 2, len(range(h0, h, 2))
        for b in range(2):
            w0 = (b - pl) % 2
            q0, cols = (w0 + pl) // 2, len(range(w0, w, 2))
            out[a, b, :, :, r0:r0 + rows, q0:q0 + cols] = by_channel[:, :, h0::2, w0::2]
    return out


def _input_transform(xp, x, padding, tiles):
    """B^T d B of every 4x4 tile of the zero-padded input, as (16, C, N * th * (tw+1)).
    The row pairs take whole (th, tw+1) blocks; the column pairs run flat over all channels and
    images, a tile's neighbour being the next element, so each add is one long contiguous loop.
    The extra last tile column is junk (it mixes neighbouring rows) that the output drops."""
    th, tw = tiles
    split = _split_parities(xp, x, padding, tiles)
    rows = xp.empty((4, 2) + split.shape[2:4] + (th, tw + 1), dtype=x.dtype)
    _tile_transform(xp, split[0, :, :, :, :th], split[1, :, :, :, :th], split[0, :, :, :, 1:],
                    split[1, :, :, :, 1:], rows)
    size = rows[0, 0].size
    rows = rows.reshape(4, 2, size)
    v = xp.empty((4, 4, size), dtype=x.dtype)
    _tile_transform(xp, rows[:, 0, :-1], rows[:, 1, :-1], rows[:, 0, 1:], rows[:, 1, 1:],
                    v[:, :, :-1].transpose(1, 0, 2))
    v[:, :, -1] = 0
    return v.reshape(16, x.shape[1], size // x.shape[1])


def _filter_rows(xp, g, out) -> None:
    """G along axis 0 of g (3, ...) into out (4, ...): g0, (g0+g1+g2)/2, (g0-g1+g2)/2, g2."""
    ends = xp.add(g[0], g[2])
    out[0] = g[0]
    xp.multiply(xp.add(ends, g[1], out=out[1]), 0.5, out=out[1])
    xp.multiply(xp.subtract(ends, g[1], out=out[2]), 0.5, out=out[2])
    out[3] = g[2]


def _filter_transform(xp, w):
    """G g G^T of every filter of w (Cout, C, 3, 3), as (16, Cout, C)."""
    taps = w.transpose(2, 3, 0, 1)  # (3, 3, Cout, C): read in place, a copy costs more
    rows = xp.empty((4,) + taps.shape[1:], dtype=w.dtype)
    _filter_rows(xp, taps, rows)
    u = xp.empty((4, 4) + taps.shape[2:], dtype=w.dtype)
    _filter_rows(xp, rows.transpose(1, 0, 2, 3), u.transpose(1, 0, 2, 3))
    return u.reshape(16, *taps.shape[2:])


def _sum3(xp, a, b, c, out):
    """(a + b) + c into out."""
    return xp.add(xp.add(a, b, out=out), c, out=out)


def _diff3(xp, a, b, c, out):
    """(a - b) - c into out."""
    return xp.subtract(xp.subtract(a, b, out=out), c, out=out)


def _output_transform(xp, m, out, tiles) -> None:
    """A^T M A of every tile's 4x4 products m (16, Cout, N * th * (tw+1)) into out
    (N, Cout, Ho, Wo). Both stages run flat; the second writes each tile's two columns next to
    each other, so that the result's rows are whole runs of the copy into `out`."""
    n, cout, ho, wo = out.shape
    th, tw = tiles
    m = m.reshape(4, 4, -1)
    cols = xp.empty((2, 4, m.shape[-1]), dtype=m.dtype)  # (tile column j, tile row a, ...)
    _sum3(xp, m[:, 0], m[:, 1], m[:, 2], cols[0])
    _diff3(xp, m[:, 1], m[:, 2], m[:, 3], cols[1])
    rows = xp.empty((2, m.shape[-1], 2), dtype=m.dtype)  # (tile row i, ..., tile column j)
    _sum3(xp, cols[:, 0], cols[:, 1], cols[:, 2], rows[0].T)
    _diff3(xp, cols[:, 1], cols[:, 2], cols[:, 3], rows[1].T)
    rows = rows.reshape(2, cout, n, th, 2 * tw + 2).transpose(2, 1, 3, 0, 4)
    for i in range(2):
        out[:, :, i::2] = rows[:, :, :(ho - i + 1) // 2, i, :wo]


# bytes of transformed input per chunk of images: with its products it stays in a core's L2
# cache between the transform, the GEMMs and the inverse transform, where whole-batch arrays
# run each stage at memory speed
CHUNK_BYTES = 1 << 20


def winograd_conv2d(xp, x, w, padding):
    """conv2d of x (N, C, H, W) with w (Cout, C, 3, 3) at stride 1, any zero padding
    ((top, bottom), (left, right)), a chunk of images at a time."""
    n, c, h, wd = x.shape
    (pt, pb), (pl, pr) = padding
    out = xp.empty((n, w.shape[0], h + pt + pb - 2, wd + pl + pr - 2), dtype=x.dtype)
    tiles = output_tiles(out.shape[2:])
    u = _filter_transform(xp, w)
    step = max(1, CHUNK_BYTES // _image_bytes(c, tiles, x.itemsize))
    for start in range(0, n, step):
        v = _input_transform(xp, x[start:start + step], padding, tiles)
        _output_transform(xp, xp.matmul(u, v), out[start:start + step], tiles)
    return out


def _grad_transform(xp, g, tiles):
    """A^T's adjoint on every 2x2 tile of the output gradient g (N, Cout, Ho, Wo): A t A^T, as
    (16, Cout, N * th * (tw+1)) in _input_transform's tile order, zero in the junk column (and
    past the output's edge) so that those tiles add nothing."""
    n, cout, ho, wo = g.shape
    th, tw = tiles
    split = xp.zeros((2, 2, cout, n, th, tw + 1), dtype=g.dtype)
    by_channel = g.transpose(1, 0, 2, 3)
    for i in range(2):
        for j in range(2):
            split[i, j, :, :, :(ho - i + 1) // 2, :(wo - j + 1) // 2] = by_channel[:, :, i::2, j::2]
    rows = xp.empty((4,) + split.shape[1:], dtype=g.dtype)
    _spread(xp, split[0], split[1], rows)
    t = xp.empty((4, 4) + split.shape[2:], dtype=g.dtype)
    _spread(xp, rows[:, 0], rows[:, 1], t.swapaxes(0, 1))
    return t.reshape(16, cout, -1)


def _spread(xp, t0, t1, out) -> None:
    """A along one axis of 2-tiles: (t0, t0 + t1, t0 - t1, -t1) into out[0..3]."""
    out[0] = t0
    xp.add(t0, t1, out=out[1])
    xp.subtract(t0, t1, out=out[2])
    xp.negative(t1, out=out[3])


def _gather_taps(xp, s, out) -> None:
    """G^T along axis 0 of s (4, ...) into out (3, ...): s0 + (s1+s2)/2, (s1-s2)/2,
    (s1+s2)/2 + s3."""
    middle = xp.multiply(xp.add(s[1], s[2]), 0.5)
    xp.add(s[0], middle, out=out[0])
    xp.multiply(xp.subtract(s[1], s[2], out=out[1]), 0.5, out=out[1])
    xp.add(middle, s[3], out=out[2])


def winograd_conv2d_weight(xp, x, g, padding):
    """conv2d's weight gradient (Cout, C, 3, 3) for input x (N, C, H, W) and output gradient
    g (N, Cout, Ho, Wo), stride 1, zero padding ((top, bottom), (left, right)): the adjoint of
    the forward's transforms, G^T [sum over tiles of (A g A^T) * (B^T d B)] G, the tile sum
    being 16 GEMMs (Cout, tiles) by (tiles, C) accumulated over chunks of images."""
    n, c = x.shape[:2]
    cout = g.shape[1]
    tiles = output_tiles(g.shape[2:])
    sums = xp.empty((16, cout, c), dtype=x.dtype)
    part = xp.empty_like(sums)
    per_image = _image_bytes(c, tiles, x.itemsize) + _image_bytes(cout, tiles, x.itemsize)
    step = max(1, CHUNK_BYTES // per_image)
    for start in range(0, n, step):
        v = _input_transform(xp, x[start:start + step], padding, tiles)
        t = _grad_transform(xp, g[start:start + step], tiles)
        into = sums if start == 0 else part
        for k in range(16):  # 2-D products: BLAS reads v's transpose in place
            xp.dot(t[k], v[k].T, out=into[k])
        if start:
            sums += part
    rows = xp.empty((3, 4, cout, c), dtype=x.dtype)
    _gather_taps(xp, sums.reshape(4, 4, cout, c), rows)
    out = xp.empty((cout, c, 3, 3), dtype=x.dtype)
    _gather_taps(xp, rows.transpose(1, 0, 2, 3), out.transpose(3, 2, 0, 1))
    return out
