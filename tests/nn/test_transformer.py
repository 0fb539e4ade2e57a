"""MultiheadAttention and the Transformer layers: PyTorch parity (outputs, attention weights and all
gradients, with every kind of mask) and torch-free checks of layout and errors."""
import warnings

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from tests.nn.test_layers import parity, rnd

L, S, N, E, H = 4, 5, 2, 6, 2
_CAUSAL = np.triu(np.ones((L, L), dtype=bool), 1)
_PADDING = np.array([[False] * (S - 1) + [True], [False] * S])

MHA_CASES = {
    "self": ({}, [rnd(L, N, E)] * 3, {}),
    "cross_kdim_vdim": ({"kdim": 5, "vdim": 3}, [rnd(L, N, E), rnd(S, N, 5), rnd(S, N, 3)], {}),
    "bool_masks": ({}, [rnd(L, N, E)] * 3, {"attn_mask": _CAUSAL,
                                            "key_padding_mask": _PADDING[:, :L]}),
    "float_3d_mask_per_head": ({}, [rnd(L, N, E), rnd(S, N, E), rnd(S, N, E)],
                               {"attn_mask": rnd(N * H, L, S, seed=4),
                                "average_attn_weights": False}),
    "batch_first_no_weights": ({"batch_first": True}, [rnd(N, L, E), rnd(N, S, E), rnd(N, S, E)],
                               {"need_weights": False, "key_padding_mask": _PADDING}),
    "bias_kv_zero_attn": ({"add_bias_kv": True, "add_zero_attn": True},
                          [rnd(L, N, E), rnd(S, N, E), rnd(S, N, E)],
                          {"key_padding_mask": _PADDING, "attn_mask": rnd(L, S, seed=2)}),
    "unbatched": ({}, [rnd(L, E), rnd(S, E), rnd(S, E)], {"key_padding_mask": _PADDING[0]}),
    "no_bias_one_head": ({"bias": False, "num_heads": 1}, [rnd(L, N, E)] * 3, {}),
}


def _mha(kwargs):
    torch = pytest.importorskip("torch")
    kwargs = {"num_heads": H, **kwargs}
    return nn.MultiheadAttention(E, **kwargs), torch.nn.MultiheadAttention(E, **kwargs)


@pytest.mark.parametrize("case", sorted(MHA_CASES))
def test_multihead_attention_parity(case):
    ctor, inputs, call = MHA_CASES[case]
    f_mod, t_mod = _mha(ctor)
    parity(f_mod, t_mod, inputs, "float64", kwargs=call)


def test_multihead_attention_float32_and_dropout_in_eval():
    f_mod, t_mod = _mha({"dropout": 0.3})
    f_mod.eval()
    t_mod.eval()
    parity(f_mod, t_mod, [rnd(L, N, E), rnd(S, N, E), rnd(S, N, E)], "float32",
           kwargs={"attn_mask": np.eye(L, S, dtype=bool)})


def _torch_class(name):
    torch = pytest.importorskip("torch")
    return getattr(torch.nn, name)


LAYER_CASES = {
    "post_norm_relu": {"activation": "relu"},
    "pre_norm_gelu": {"activation": "gelu", "norm_first": True},
    "pre_norm_relu_batch_first": {"norm_first": True, "batch_first": True},
    "post_norm_gelu_batch_first": {"activation": "gelu", "batch_first": True,
                                   "layer_norm_eps": 1e-3},
}


@pytest.mark.parametrize("case", sorted(LAYER_CASES))
def test_encoder_layer_parity(case):
    kwargs = {"dim_feedforward": 10, "dropout": 0.0, **LAYER_CASES[case]}
    f_mod = nn.TransformerEncoderLayer(E, H, **kwargs)
    t_mod = _torch_class("TransformerEncoderLayer")(E, H, **kwargs)
    x = rnd(N, L, E) if kwargs.get("batch_first") else rnd(L, N, E)
    parity(f_mod, t_mod, [x], "float64",
           kwargs={"src_mask": _CAUSAL, "src_key_padding_mask": _PADDING[:, :L]})


def test_encoder_layer_parity_float32_with_callable_activation():
    torch = pytest.importorskip("torch")
    f_mod = nn.TransformerEncoderLayer(E, H, 8, 0.0, activation=nn.GELU(approximate="tanh"))
    t_mod = torch.nn.TransformerEncoderLayer(E, H, 8, 0.0,
                                             activation=torch.nn.GELU(approximate="tanh"))
    parity(f_mod, t_mod, [rnd(L, N, E)], "float32")


def test_encoder_stack_parity():
    kwargs = {"dim_feedforward": 8, "dropout": 0.0, "norm_first": True}
    f_mod = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, **kwargs), 2,
                                  norm=nn.LayerNorm(E))
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_mod = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, **kwargs), 2,
                                            norm=torch.nn.LayerNorm(E))
    parity(f_mod, t_mod, [rnd(L, N, E)], "float64", kwargs={"src_key_padding_mask": _PADDING[:, :L]})


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_parity(norm_first):
    kwargs = {"dim_feedforward": 8, "dropout": 0.0, "norm_first": norm_first}
    f_mod = nn.TransformerDecoderLayer(E, H, **kwargs)
    t_mod = _torch_class("TransformerDecoderLayer")(E, H, **kwargs)
    parity(f_mod, t_mod, [rnd(L, N, E), rnd(S, N, E, seed=1)], "float64",
           kwargs={"tgt_mask": _CAUSAL, "memory_key_padding_mask": _PADDING})


def test_full_transformer_parity():
    kwargs = dict(d_model=E, nhead=H, num_encoder_layers=1, num_decoder_layers=1,
                  dim_feedforward=8, dropout=0.0, batch_first=True)
    f_mod = nn.Transformer(**kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_mod = _torch_class("Transformer")(**kwargs)
    mask = nn.Transformer.generate_square_subsequent_mask(L).numpy()
    parity(f_mod, t_mod, [rnd(N, S, E), rnd(N, L, E, seed=1)], "float64",
           kwargs={"tgt_mask": mask})


# ---- torch-free -----------------------------------------------------------------------------------
def test_multihead_attention_parameter_layout():
    mha = nn.MultiheadAttention(E, H)
    assert list(mha.state_dict()) == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                      "out_proj.bias"]
    assert mha.in_proj_weight.shape == (3 * E, E)
    assert not np.any(mha.in_proj_bias.detach().numpy())
    cross = nn.MultiheadAttention(E, H, kdim=4, vdim=3, bias=False)
    assert list(cross.state_dict()) == ["q_proj_weight", "k_proj_weight", "v_proj_weight",
                                        "out_proj.weight"]
    assert cross.k_proj_weight.shape == (E, 4) and cross.in_proj_weight is None
    assert repr(mha) == ("MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear("
                         "in_features=6, out_features=6, bias=True)\n)")
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(6, 4)


def test_attention_weights_shapes_and_masking():
    mha = nn.MultiheadAttention(E, H)
    q = flow.tensor(rnd(L, N, E), dtype=flow.float32)
    out, w = mha(q, q, q, attn_mask=flow.tensor(_CAUSAL))
    assert out.shape == (L, N, E) and w.shape == (N, L, L)
    w = w.detach().numpy()
    np.testing.assert_allclose(w.sum(-1), 1, rtol=1e-6)
    assert np.all(w[:, _CAUSAL] == 0)                       # no attention to future positions
    _, per_head = mha(q, q, q, average_attn_weights=False)
    assert per_head.shape == (N, H, L, L)
    assert mha(q, q, q, need_weights=False)[1] is None
    with pytest.raises(RuntimeError, match="is_causal"):
        mha(q, q, q, is_causal=True)
    with pytest.raises(RuntimeError, match="2D attn_mask"):
        mha(q, q, q, attn_mask=flow.zeros(L, L + 1))


def test_encoder_clones_are_independent_and_masks_generated():
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=8)
    enc = nn.TransformerEncoder(layer, 3)
    names = [n for n, _ in enc.named_parameters()]
    assert names[0] == "layers.0.self_attn.in_proj_weight" and len(names) == 3 * 12
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    assert [n for n, _ in layer.named_children()] == [
        "self_attn", "linear1", "dropout", "linear2", "norm1", "norm2", "dropout1", "dropout2"]
    mask = nn.Transformer.generate_square_subsequent_mask(3).numpy()
    np.testing.assert_array_equal(mask, [[0, -np.inf, -np.inf], [0, 0, -np.inf], [0, 0, 0]])
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerEncoderLayer(E, H, activation="swish")
