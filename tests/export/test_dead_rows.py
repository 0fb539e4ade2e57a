"""Attention's fully-masked-row test (export/dead_rows.py): dropped where a constant mask keeps
a key in every row (causal masks at any query/key lengths, user masks that hide no query), kept
where a row may mask every key (a user's mask that hides one, a mask fed at run time). Every
export runs in onnxruntime against eager."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import check_model_matches, run

import dualflow as flow  # noqa: E402
from dualflow import nn  # noqa: E402
from dualflow.nn import functional as F  # noqa: E402

ROW_TEST = {"Equal", "Not", "Cast", "ReduceSum"}   # all(w == -inf) along the softmax axis


class Attention(nn.Module):
    """SDPA of its inputs (q, k, v[, mask]), causal or with a constant mask."""

    def __init__(self, mask: np.ndarray | None = None, causal: bool = False):
        super().__init__()
        self.mask = None if mask is None else flow.tensor(mask)
        self.causal = causal

    def forward(self, q, k, v, mask=None):
        mask = self.mask if mask is None else mask
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal)


def _qkv(queries: int, keys: int, seed: int = 0) -> tuple:
    flow.manual_seed(seed)
    return (flow.randn(2, 3, queries, 4), flow.randn(2, 3, keys, 4), flow.randn(2, 3, keys, 5))


def _op_types(proto) -> list:
    return [n.op_type for n in proto.graph.node]


def _masks(proto) -> list:
    """The constant each Softmax's input was masked with (a bool Where's condition, or an
    additive 0 / -inf mask)."""
    producer = {o: n for n in proto.graph.node for o in n.output}
    inits = {t.name for t in proto.graph.initializer}
    masking = [producer[n.input[0]] for n in proto.graph.node if n.op_type == "Softmax"]
    masks = [m.input[0] if m.op_type == "Where" else (set(m.input) & inits).pop() for m in masking]
    assert inits.issuperset(masks), masks
    return masks


def _assert_test_dropped(proto) -> None:
    types = _op_types(proto)
    assert types[:3] + types[4:] == ["Transpose", "MatMul", "Mul", "Softmax", "MatMul"], types
    assert types[3] in ("Where", "Add") and len(_masks(proto)) == 1, types


def _assert_test_kept(proto) -> None:
    types = _op_types(proto)
    assert ROW_TEST <= set(types) and types.count("Where") == 2, types


@pytest.mark.parametrize("queries, keys", [(5, 5), (3, 6), (6, 4), (1, 1)])
@pytest.mark.parametrize("opset", [11, 12, 13, 17])
def test_causal_attention_has_no_fully_masked_row_test(queries, keys, opset):
    # top-left aligned: every query keeps key 0, also with more queries than keys
    proto = check_model_matches(Attention(causal=True), _qkv(queries, keys), opset,
                                dynamic_axes={f"input_{i}": {0: "batch"} for i in range(3)})
    _assert_test_dropped(proto)


def test_a_constant_mask_that_hides_no_query_drops_the_test():
    rng = np.random.default_rng(0)
    mask = rng.random((4, 6)) < 0.4
    mask[np.arange(4), rng.integers(0, 6, 4)] = True          # one kept key per row at least
    proto = check_model_matches(Attention(mask), _qkv(4, 6))
    _assert_test_dropped(proto)


MASKS_HIDING_A_QUERY = [
    ("row 2 of (4, 6)", lambda m: m.__setitem__(2, False), (4, 6)),
    ("broadcast (4, 1)", lambda m: m.__setitem__((1, 0), False), (4, 1)),
    ("per head (3, 4, 6)", lambda m: m.__setitem__((1, 3), False), (3, 4, 6)),
    ("one key row (6,)", lambda m: m.fill(False), (6,)),
]


@pytest.mark.parametrize("label, hide, shape", MASKS_HIDING_A_QUERY,
                         ids=[c[0] for c in MASKS_HIDING_A_QUERY])
def test_a_mask_that_hides_a_query_keeps_the_test_and_its_zeros(label, hide, shape):
    mask = np.ones(shape, dtype=bool)
    hide(mask)
    q, k, v = _qkv(4, 6, seed=1)
    proto = check_model_matches(Attention(mask), (q, k, v))
    _assert_test_kept(proto)
    out = run(proto, [q.numpy(), k.numpy(), v.numpy()])[0]
    hidden = ~np.broadcast_to(mask, (2, 3, 4, 6)).any(axis=-1)
    assert hidden.any() and np.all(out[hidden] == 0) and np.all(np.isfinite(out))


BROADCAST_MASKS_HIDING_NO_QUERY = [
    ("every query (4, 1)", np.ones((4, 1), bool)),
    ("per head (3, 1, 6)", np.eye(3, 6, dtype=bool)[:, None, :]),
    ("one key row (6,)", np.arange(6) % 2 == 1),
]


@pytest.mark.parametrize("label, mask", BROADCAST_MASKS_HIDING_NO_QUERY,
                         ids=[c[0] for c in BROADCAST_MASKS_HIDING_NO_QUERY])
def test_broadcast_masks_that_hide_no_query_drop_the_test(label, mask):
    proto = check_model_matches(Attention(mask), _qkv(4, 6, seed=2))
    _assert_test_dropped(proto)


def test_a_mask_given_at_run_time_keeps_the_test():
    q, k, v = _qkv(4, 6, seed=3)
    mask = np.ones((4, 6), dtype=bool)
    mask[0] = False
    proto = check_model_matches(Attention(), (q, k, v, flow.tensor(mask)))
    _assert_test_kept(proto)


def test_a_float_mask_keeps_the_test():
    additive = np.zeros((4, 6), np.float32)
    additive[1] = -np.inf
    proto = check_model_matches(Attention(additive), _qkv(4, 6, seed=4))
    assert ROW_TEST <= set(_op_types(proto))


def test_gpt_blocks_share_one_constant_mask_and_test_no_row():
    flow.manual_seed(5)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln, self.qkv, self.proj = nn.LayerNorm(16), nn.Linear(16, 48), nn.Linear(16, 16)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (z.view(b, t, 2, 8).transpose(1, 2)
                       for z in self.qkv(self.ln(x)).split(16, 2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))

    model = nn.Sequential(Block(), Block())
    proto = check_model_matches(model, (flow.randn(2, 7, 16),), 17,
                                dynamic_axes={"input_0": {0: "batch"}})
    types = _op_types(proto)
    assert not ROW_TEST & set(types)
    masks = _masks(proto)
    assert len(masks) == 2 and masks[0] == masks[1], masks   # one, shared by both layers
