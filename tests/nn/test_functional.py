"""dualflow.nn.functional: parity with torch.nn.functional (values and gradients, float64 and
float32) when torch is installed, plus torch-free checks of the semantics that matter most."""
import warnings

import numpy as np
import pytest

import dualflow as flow
import dualflow.nn.functional as F

R = np.random.default_rng(0)


def rn(*shape, low=None, high=None):
    return R.standard_normal(shape) if low is None else R.uniform(low, high, shape)


def probs(n, c):
    return R.dirichlet(np.ones(c), n)


class Case:
    """`fn(F, *tensors)` is run with both namespaces; `grads`: inputs whose gradients are compared
    (default: every float input)."""

    def __init__(self, label, fn, arrays, grads=None):
        self.label, self.fn, self.arrays = label, fn, arrays
        self.grads = tuple(i for i, a in enumerate(arrays) if a.dtype.kind == "f") \
            if grads is None else grads


_TARGETS = np.array([0, 3, -100, 1, 3])
_T3 = np.array([[0, 3, 1], [2, 1, 1]])
_FULLY_MASKED = np.array([[True, False, True, False, True, True]] * 2 + [[False] * 6] +
                         [[True] * 6])

CASES = [
    # convolutions
    Case("conv1d", lambda F, x, w, b: F.conv1d(x, w, b, stride=2, padding=1),
         [rn(2, 3, 7), rn(4, 3, 3), rn(4)]),
    Case("conv1d-same-dilated-groups", lambda F, x, w: F.conv1d(x, w, padding="same", dilation=2,
                                                               groups=3), [rn(2, 3, 8), rn(6, 1, 4)]),
    Case("conv2d", lambda F, x, w, b: F.conv2d(x, w, b), [rn(2, 3, 6, 5), rn(4, 3, 3, 3), rn(4)]),
    Case("conv2d-strided-grouped", lambda F, x, w: F.conv2d(x, w, stride=(2, 1), padding=(1, 2),
                                                           dilation=(2, 1), groups=2),
         [rn(2, 4, 7, 6), rn(6, 2, 3, 2)]),
    Case("conv2d-same-even-kernel", lambda F, x, w: F.conv2d(x, w, padding="same"),
         [rn(1, 2, 5, 6), rn(3, 2, 4, 2)]),
    Case("conv2d-valid-unbatched", lambda F, x, w: F.conv2d(x, w, padding="valid"),
         [rn(2, 5, 5), rn(3, 2, 2, 2)]),
    Case("conv_transpose1d", lambda F, x, w, b: F.conv_transpose1d(x, w, b, stride=2, padding=1,
                                                                   output_padding=1),
         [rn(2, 3, 5), rn(3, 2, 3), rn(2)]),
    Case("conv_transpose2d", lambda F, x, w, b: F.conv_transpose2d(
        x, w, b, stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2, dilation=(1, 2)),
        [rn(2, 4, 4, 3), rn(4, 3, 3, 2), rn(6)]),
    # pooling
    Case("max_pool1d", lambda F, x: F.max_pool1d(x, 3, stride=2, padding=1), [rn(2, 3, 9)]),
    Case("max_pool2d", lambda F, x: F.max_pool2d(x, 2), [rn(2, 3, 6, 5)]),
    Case("max_pool2d-indices", lambda F, x: F.max_pool2d(x, (3, 2), stride=(2, 1), padding=1,
                                                       dilation=(1, 2), return_indices=True),
         [rn(2, 2, 7, 6)]),
    Case("max_pool2d-ceil", lambda F, x: F.max_pool2d(x, 3, stride=2, ceil_mode=True,
                                                    return_indices=True), [rn(1, 2, 6, 8)]),
    Case("avg_pool1d", lambda F, x: F.avg_pool1d(x, 3, stride=2, padding=1), [rn(2, 3, 9)]),
    Case("avg_pool2d", lambda F, x: F.avg_pool2d(x, 3, stride=2, padding=1), [rn(2, 3, 7, 6)]),
    Case("avg_pool2d-exclude-pad-ceil", lambda F, x: F.avg_pool2d(
        x, (3, 2), stride=2, padding=1, ceil_mode=True, count_include_pad=False), [rn(1, 2, 6, 7)]),
    Case("avg_pool2d-ceil-include-pad", lambda F, x: F.avg_pool2d(x, 3, stride=2, padding=1,
                                                                ceil_mode=True), [rn(1, 2, 6, 6)]),
    Case("avg_pool2d-divisor", lambda F, x: F.avg_pool2d(x, 2, divisor_override=3),
         [rn(1, 2, 4, 4)]),
    Case("adaptive_avg_pool1d", lambda F, x: F.adaptive_avg_pool1d(x, 4), [rn(2, 3, 7)]),
    Case("adaptive_avg_pool2d", lambda F, x: F.adaptive_avg_pool2d(x, (3, 4)), [rn(2, 3, 7, 9)]),
    Case("adaptive_avg_pool2d-none", lambda F, x: F.adaptive_avg_pool2d(x, (None, 2)),
         [rn(1, 2, 5, 5)]),
    # normalisation
    Case("softmax", lambda F, x: F.softmax(x, dim=1), [rn(3, 4, 2) * 10]),
    Case("log_softmax", lambda F, x: F.log_softmax(x, dim=-1), [rn(3, 4) * 10]),
    Case("softmin", lambda F, x: F.softmin(x, dim=0), [rn(3, 4)]),
    Case("layer_norm", lambda F, x, w, b: F.layer_norm(x, (3, 4), w, b),
         [rn(2, 3, 4), rn(3, 4), rn(3, 4)]),
    Case("layer_norm-plain", lambda F, x: F.layer_norm(x, (4,)), [rn(2, 3, 4)]),
    Case("group_norm", lambda F, x, w, b: F.group_norm(x, 2, w, b), [rn(2, 4, 3, 2), rn(4), rn(4)]),
    Case("batch_norm-train", lambda F, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
         [rn(4, 3, 2, 2), rn(3), rn(3)]),
    Case("normalize", lambda F, x: F.normalize(x, p=3, dim=-1), [rn(3, 4)]),
    Case("cosine_similarity", lambda F, a, b: F.cosine_similarity(a, b, dim=-1),
         [rn(3, 4), rn(1, 4)]),
    # attention
    Case("sdpa", lambda F, q, k, v: F.scaled_dot_product_attention(q, k, v),
         [rn(2, 2, 3, 4), rn(2, 2, 5, 4), rn(2, 2, 5, 3)]),
    Case("sdpa-causal-scale", lambda F, q, k, v: F.scaled_dot_product_attention(
        q, k, v, is_causal=True, scale=0.7), [rn(2, 4, 3), rn(2, 6, 3), rn(2, 6, 3)]),
    Case("sdpa-bool-mask-fully-masked-row", lambda F, q, k, v, m: F.scaled_dot_product_attention(
        q, k, v, attn_mask=m), [rn(2, 4, 3), rn(2, 6, 3), rn(2, 6, 3), _FULLY_MASKED]),
    Case("sdpa-float-mask", lambda F, q, k, v, m: F.scaled_dot_product_attention(
        q, k, v, attn_mask=m), [rn(2, 4, 3), rn(2, 6, 3), rn(2, 6, 3), rn(4, 6)], grads=(0, 1, 2)),
    Case("sdpa-gqa", lambda F, q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
         [rn(1, 4, 3, 2), rn(1, 2, 5, 2), rn(1, 2, 5, 2)]),
    # re-exported activations and layers
    *[Case(name, (lambda n: lambda F, x: getattr(F, n)(x))(name), [rn(3, 4) * 3])
      for name in ("relu", "relu6", "gelu", "silu", "sigmoid", "tanh", "softplus", "leaky_relu",
                   "elu", "hardtanh", "mish", "logsigmoid")],
    Case("gelu-tanh", lambda F, x: F.gelu(x, approximate="tanh"), [rn(3, 4)]),
    Case("linear", lambda F, x, w, b: F.linear(x, w, b), [rn(2, 3), rn(4, 3), rn(4)]),
    Case("embedding", lambda F, i, w: F.embedding(i, w), [np.array([[0, 2], [2, 1]]), rn(3, 4)]),
    Case("one_hot", lambda F, i: F.one_hot(i, 4), [np.array([0, 3, 1])]),
    Case("pad", lambda F, x: F.pad(x, (1, 2, 0, 1), value=0.5), [rn(2, 3)]),
    Case("prelu", lambda F, x, w: F.prelu(x, w), [rn(2, 3, 4), rn(3, low=0, high=1)]),
    Case("bilinear", lambda F, a, b, w, c: F.bilinear(a, b, w, c),
         [rn(3, 4), rn(3, 5), rn(2, 4, 5), rn(2)]),
    Case("glu", lambda F, x: F.glu(x, 1), [rn(2, 4)]),
    # losses (torch does not differentiate class weights of class-index losses)
    *[Case(f"cross_entropy-{red}", (lambda r: lambda F, x, t, w: F.cross_entropy(
        x, t, w, reduction=r, label_smoothing=0.2))(red), [rn(5, 4), _TARGETS, rn(4, low=.5, high=2)],
        grads=(0,)) for red in ("none", "mean", "sum")],
    Case("cross_entropy-spatial-ignore", lambda F, x, t: F.cross_entropy(x, t, ignore_index=1),
         [rn(2, 4, 3), _T3]),
    Case("cross_entropy-probabilities", lambda F, x, t, w: F.cross_entropy(
        x, t, w, label_smoothing=0.1), [rn(5, 4), probs(5, 4), rn(4, low=.5, high=2)]),
    Case("cross_entropy-unbatched", lambda F, x, t: F.cross_entropy(x, t, reduction="none"),
         [rn(4), np.array(2)]),
    *[Case(f"nll_loss-{red}", (lambda r: lambda F, x, t, w: F.nll_loss(
        x, t, w, reduction=r))(red), [rn(5, 4), _TARGETS, rn(4, low=.5, high=2)], grads=(0,))
      for red in ("none", "mean", "sum")],
    Case("binary_cross_entropy", lambda F, x, y, w: F.binary_cross_entropy(x, y, w),
         [rn(3, 4, low=.05, high=.95), rn(3, 4, low=0, high=1), rn(4, low=.5, high=2)],
         grads=(0, 1)),
    Case("bce_with_logits", lambda F, x, y, w, pw: F.binary_cross_entropy_with_logits(
        x, y, w, reduction="sum", pos_weight=pw),
        [np.concatenate([[0.0], rn(11) * 3]).reshape(3, 4), rn(3, 4, low=0, high=1),
         rn(4, low=.5, high=2), rn(4, low=.5, high=2)], grads=(0, 1)),
    Case("mse_loss-weighted", lambda F, a, b, w: F.mse_loss(a, b, weight=w),
         [rn(3, 4), rn(3, 4), rn(3, 4, low=.1, high=1)]),
    Case("mse_loss-none", lambda F, a, b: F.mse_loss(a, b, reduction="none"), [rn(3, 4), rn(3, 4)]),
    Case("l1_loss", lambda F, a, b, w: F.l1_loss(a, b, reduction="sum", weight=w),
         [rn(3, 4), rn(3, 4), rn(3, 4, low=.1, high=1)]),
    Case("smooth_l1_loss", lambda F, a, b: F.smooth_l1_loss(a, b, beta=0.7), [rn(3, 4), rn(3, 4)]),
    Case("smooth_l1_loss-beta0", lambda F, a, b: F.smooth_l1_loss(a, b, beta=0.0),
         [rn(3, 4), rn(3, 4)]),
    Case("huber_loss", lambda F, a, b, w: F.huber_loss(a, b, delta=0.6, weight=w),
         [rn(3, 4), rn(3, 4), rn(3, 4, low=.1, high=1)]),
    Case("kl_div-batchmean-zero-targets", lambda F, a, b: F.kl_div(a, b, reduction="batchmean"),
         [np.log(probs(3, 4)), np.where(np.eye(3, 4) > 0, 0.0, probs(3, 4))], grads=(0,)),
    Case("kl_div", lambda F, a, b: F.kl_div(a, b, reduction="none"),
         [np.log(probs(3, 4)), probs(3, 4)]),
    Case("kl_div-log-target", lambda F, a, b: F.kl_div(a, b, reduction="sum", log_target=True),
         [np.log(probs(3, 4)), np.log(probs(3, 4))]),
]


def _as(arrays, dtype):
    return [a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays]


def _run(lib, F_, case, arrays):
    ts = [lib.tensor(a) for a in arrays]
    for i in case.grads:
        ts[i].requires_grad_(True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = case.fn(F_, *ts)
    outs = out if isinstance(out, tuple) else (out,)
    diff = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
    if diff:  # the same fixed cotangent for both libraries
        seeds = [lib.tensor(np.linspace(-1, 1, o.numel()).reshape(o.shape)).to(o.dtype)
                 for o in diff]
        lib.autograd.backward(diff, seeds)
    values = [o.detach().numpy() for o in outs]
    return values, [ts[i].grad.numpy() for i in case.grads] if diff else []


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 1e-5)],
                         ids=["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_matches_torch(case, dtype, tol):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF
    arrays = _as(case.arrays, dtype)
    got, got_grads = _run(flow, F, case, arrays)
    want, want_grads = _run(torch, TF, case, arrays)
    assert len(got) == len(want) and len(got_grads) == len(want_grads)
    for g, w in zip(got + got_grads, want + want_grads):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("fn,arrays", [
    (lambda F, x, w: F.conv2d(x, w, stride=2, padding=1, groups=2),
     [rn(2, 4, 5, 5), rn(4, 2, 3, 3)]),
    (lambda F, x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
     [rn(1, 2, 3, 3), rn(2, 3, 3, 3)]),
    (lambda F, x: F.max_pool2d(x, 3, stride=2, padding=1) ** 3, [rn(1, 2, 5, 5)]),
], ids=["conv2d", "conv_transpose2d", "max_pool2d"])
def test_double_backward_matches_torch(fn, arrays):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF

    def second_order(lib, F_):
        ts = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = fn(F_, *ts)
        grads = lib.autograd.grad((out * out).sum(), ts, create_graph=True)
        sum(((g * g).sum() for g in grads)).backward()
        return [t.grad.detach().numpy() for t in ts]

    for g, w in zip(second_order(flow, F), second_order(torch, TF)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10)


def test_batch_norm_running_stats_match_torch():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF
    x, mean, var = rn(6, 3, 2), rn(3), rn(3, low=.5, high=2)
    fm, fv, tm, tv = flow.tensor(mean), flow.tensor(var), torch.tensor(mean), torch.tensor(var)
    for _ in range(2):
        F.batch_norm(flow.tensor(x), fm, fv, training=True, momentum=0.3)
        TF.batch_norm(torch.tensor(x), tm, tv, training=True, momentum=0.3)
    np.testing.assert_allclose(fm.numpy(), tm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(fv.numpy(), tv.numpy(), rtol=1e-12)
    np.testing.assert_allclose(F.batch_norm(flow.tensor(x), fm, fv, training=False).numpy(),
                               TF.batch_norm(torch.tensor(x), tm, tv, training=False).numpy(),
                               rtol=1e-12)


# ---- torch-free semantics ----------------------------------------------------------------------

def _log_softmax_np(x):
    s = x - x.max(axis=1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


@pytest.mark.parametrize("primitive,composite", [
    (lambda t: F.softmax(t, 1), lambda t: flow.exp(t - flow.logsumexp(t, 1, keepdim=True))),
    (lambda t: F.log_softmax(t, 1), lambda t: t - flow.logsumexp(t, 1, keepdim=True)),
], ids=["softmax", "log_softmax"])
def test_softmax_primitives_match_their_composites(primitive, composite):
    """Values, gradients and second derivatives of the fused kernels against plain ops."""
    data, cotangent = rn(3, 5) * 20, rn(3, 5)

    def derivatives(fn):
        x = flow.tensor(data, requires_grad=True)
        y = fn(x)
        (g,) = flow.autograd.grad((y * flow.tensor(cotangent)).sum(), x, create_graph=True)
        (g * g).sum().backward()
        return y.detach().numpy(), g.detach().numpy(), x.grad.numpy()

    for a, b in zip(derivatives(primitive), derivatives(composite)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_cross_entropy_ignore_index_and_weight_mean_over_kept_weights():
    x, t, w = rn(5, 4), np.array([0, 3, 2, 1, 3]), np.array([0.5, 1.0, 2.0, 1.5])
    keep = t != 2
    picked = -_log_softmax_np(x)[np.arange(5), t] * w[t]
    want = picked[keep].sum() / w[t][keep].sum()
    got = F.cross_entropy(flow.tensor(x), flow.tensor(t), flow.tensor(w), ignore_index=2)
    np.testing.assert_allclose(got.item(), want, rtol=1e-12)
    none = F.cross_entropy(flow.tensor(x), flow.tensor(t), flow.tensor(w), ignore_index=2,
                           reduction="none").numpy()
    np.testing.assert_allclose(none, np.where(keep, picked, 0.0), rtol=1e-12)


def test_ignored_targets_get_no_gradient():
    x = flow.tensor(rn(4, 3), requires_grad=True)
    F.cross_entropy(x, flow.tensor([0, -100, 2, -100]), label_smoothing=0.3).backward()
    g = x.grad.numpy()
    assert np.all(g[[1, 3]] == 0) and np.all(np.abs(g[[0, 2]]).sum(axis=1) > 0)


def test_label_smoothing_mixes_uniform_target():
    x, t, eps = rn(6, 5), np.array([0, 4, 1, 1, 3, 2]), 0.25
    soft = np.full((6, 5), eps / 5)
    soft[np.arange(6), t] += 1 - eps
    want = -(soft * _log_softmax_np(x)).sum(axis=1).mean()
    got = F.cross_entropy(flow.tensor(x), flow.tensor(t), label_smoothing=eps).item()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # the same distribution given as class probabilities gives the same loss
    np.testing.assert_allclose(F.cross_entropy(flow.tensor(x), flow.tensor(soft)).item(), want,
                               rtol=1e-12)


@pytest.mark.parametrize("call,match", [
    (lambda: F.cross_entropy(flow.zeros(4, 3), flow.tensor([0, 1, 2])), r"\(4,\).*\(4, 3\).*\(3,\)"),
    (lambda: F.nll_loss(flow.zeros(2, 3, 5), flow.tensor([[0, 1, 2]] * 2)), r"\(2, 5\).*\(2, 3\)"),
    (lambda: F.nll_loss(flow.zeros(4, 3), flow.zeros(4)), r"integer"),
    (lambda: F.cross_entropy(flow.zeros(4, 3), flow.zeros(4, 2)), r"\(4, 3\).*\(4, 2\)"),
    (lambda: F.cross_entropy(flow.zeros(2, 3), flow.tensor([0, 3])), r"out of bounds"),
    (lambda: F.binary_cross_entropy(flow.ones(3) / 2, flow.ones(3, 1)), r"\(3, 1\).*\(3,\)"),
    (lambda: F.mse_loss(flow.zeros(3), flow.zeros(3), reduction="avg"), r"reduction"),
    (lambda: F.conv2d(flow.zeros(1, 3, 5, 5), flow.zeros(2, 2, 3, 3)), r"\(1, 3, 5, 5\).*\(2, 2, 3, 3\)"),
    (lambda: F.conv2d(flow.zeros(1, 2, 5, 5), flow.zeros(2, 2, 3, 3), stride=2, padding="same"),
     r"same"),
    (lambda: F.conv2d(flow.zeros(1, 2, 2, 2), flow.zeros(2, 2, 3, 3)), r"smaller"),
    (lambda: F.max_pool2d(flow.zeros(1, 1, 4, 4), 2, padding=2), r"half"),
    (lambda: F.layer_norm(flow.zeros(2, 3), (2,)), r"\[2, 3\]"),
    (lambda: F.dropout(flow.zeros(3), 1.5), r"between 0 and 1"),
    (lambda: F.batch_norm(flow.zeros(1, 3), None, None, training=True), r"more than 1 value"),
])
def test_bad_arguments_raise_clear_errors(call, match):
    with pytest.raises((ValueError, TypeError, IndexError, RuntimeError), match=match):
        call()


def test_batch_norm_updates_running_stats_in_place():
    x = rn(8, 3, 2)
    mean, var = flow.zeros(3, dtype=flow.float64), flow.ones(3, dtype=flow.float64)
    ids = id(mean._data), id(var._data)
    y = F.batch_norm(flow.tensor(x), mean, var, training=True, momentum=0.2, eps=1e-5).numpy()
    mu, v = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    np.testing.assert_allclose(y, (x - mu[:, None]) / np.sqrt(v[:, None] + 1e-5), rtol=1e-10)
    np.testing.assert_allclose(mean.numpy(), 0.2 * mu, rtol=1e-12)
    np.testing.assert_allclose(var.numpy(), 0.8 + 0.2 * x.var(axis=(0, 2), ddof=1), rtol=1e-12)
    assert (id(mean._data), id(var._data)) == ids and mean.grad_fn is None
    y = F.batch_norm(flow.tensor(x), mean, var, training=False).numpy()
    np.testing.assert_allclose(y, (x - mean.numpy()[:, None]) /
                               np.sqrt(var.numpy()[:, None] + 1e-5), rtol=1e-12)


def test_dropout_scales_kept_values_and_is_reproducible():
    x = flow.ones(20000)
    flow.manual_seed(3)
    a = F.dropout(x, 0.25).numpy()
    flow.manual_seed(3)
    b = F.dropout(x, 0.25).numpy()
    np.testing.assert_array_equal(a, b)
    assert set(np.unique(a)) == {0.0, np.float32(1 / 0.75)}
    assert abs((a == 0).mean() - 0.25) < 0.02
    assert not np.array_equal(a, F.dropout(x, 0.25).numpy())  # the stream moves on


def test_dropout_identity_cases_and_gradient():
    x = flow.tensor(rn(4, 5), requires_grad=True)
    assert F.dropout(x, 0.5, training=False) is x and F.dropout(x, 0.0) is x
    assert np.all(F.dropout(x, 1.0).detach().numpy() == 0)
    y = F.dropout(x, 0.5)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy() / x.detach().numpy())


def test_dropout2d_zeroes_whole_channels():
    y = F.dropout2d(flow.ones(4, 6, 3, 3), 0.5).numpy()
    per_channel = y.reshape(4, 6, 9)
    assert np.all(per_channel == per_channel[..., :1]) and set(np.unique(y)) == {0.0, 2.0}


def test_causal_attention_matches_numpy_and_ignores_the_future():
    q, k, v = rn(2, 4, 3), rn(2, 4, 3), rn(2, 4, 5)
    out = F.scaled_dot_product_attention(flow.tensor(q), flow.tensor(k), flow.tensor(v),
                                         is_causal=True).numpy()
    s = q @ k.transpose(0, 2, 1) / np.sqrt(3)
    s = np.where(np.tril(np.ones((4, 4), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(out, (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-12)
    k2, v2 = k.copy(), v.copy()
    k2[:, 2:], v2[:, 2:] = 9.0, -9.0
    out2 = F.scaled_dot_product_attention(flow.tensor(q), flow.tensor(k2), flow.tensor(v2),
                                          is_causal=True).numpy()
    np.testing.assert_allclose(out2[:, :2], out[:, :2], rtol=1e-12)


def test_max_pool_ties_go_to_the_first_position():
    x = flow.ones(1, 1, 4, 4, requires_grad=True)
    y, idx = F.max_pool2d(x, 2, return_indices=True)
    np.testing.assert_array_equal(idx.numpy()[0, 0], [[0, 2], [8, 10]])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[0, 0],
                                  [[1, 0, 1, 0], [0, 0, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]])


def test_compiled_graph_matches_eager_with_the_same_seed():
    from dualflow.graph import Trace, compile_graph
    w = flow.tensor(rn(4, 2, 3, 3), requires_grad=True)
    state = {"mean": flow.zeros(4), "var": flow.ones(4)}

    def step(x, t):
        h = F.batch_norm(F.conv2d(x, w, padding=1), state["mean"], state["var"], training=True)
        h = F.dropout(F.max_pool2d(F.relu(h), 2), 0.3)
        loss = F.cross_entropy(F.adaptive_avg_pool2d(h, 1).reshape(2, 4), t, label_smoothing=0.1)
        return (loss,) + flow.autograd.grad(loss, [w])

    x, t = flow.tensor(rn(2, 2, 6, 6)), flow.tensor([1, 3])
    trace = Trace("step", {id(w): "w"})
    with trace:
        trace.set_outputs(step(*trace.inputs((x, t))))
    assert np.all(state["mean"].numpy() == 0)  # tracing records the update, it does not run it
    exe, _ = compile_graph(trace.graph)
    flow.manual_seed(11)
    got = exe([x._data, t._data])
    got_stats = [s.numpy().copy() for s in state.values()]
    state["mean"], state["var"] = flow.zeros(4), flow.ones(4)
    flow.manual_seed(11)
    want = step(x, t)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e.detach().numpy(), rtol=1e-12)
    for g, s in zip(got_stats, state.values()):
        np.testing.assert_allclose(g, s.numpy(), rtol=1e-12)


def test_every_public_name_is_a_torch_functional_name():
    torch = pytest.importorskip("torch")
    assert [n for n in F.__all__ if not hasattr(torch.nn.functional, n)] == []
    assert all(callable(getattr(F, n)) for n in F.__all__)
