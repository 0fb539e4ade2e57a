"""JAX `jit`: hand-written equivalents of the workloads over the same PyTorch-named weights.

The jitted training step computes the loss and gradients and applies PyTorch's SGD-momentum
update (buf = 0.9 buf + g; p -= lr buf); parameters and momentum buffers are donated, so XLA can
update them in place as the other systems do.
"""
from __future__ import annotations

from .systems import Prepared, Skip, System
from .timing import first_call
from .workloads import CLASSES, LR, MOMENTUM


def jax_layout(weights: dict) -> dict:
    """PyTorch-named weights with every matrix (Linear, attention projections) as (in, out)."""
    import jax.numpy as jnp
    return {k: jnp.asarray(v.T.copy() if v.ndim == 2 else v) for k, v in weights.items()}


def _linear(p, name, x):
    return x @ p[f"{name}.weight"] + p[f"{name}.bias"]


def _conv_relu_pool(p, name, x):
    import jax
    w = p[f"{name}.weight"]
    x = jax.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    x = jax.nn.relu(x + p[f"{name}.bias"][None, :, None, None])
    return jax.lax.reduce_window(x, -float("inf"), jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2),
                                 "VALID")


def _layer_norm(p, name, x, eps=1e-5):
    import jax.numpy as jnp
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * p[f"{name}.weight"] + p[f"{name}.bias"]


def _self_attention(p, name, x, heads=4):
    import jax
    b, s, d = x.shape
    qkv = x @ p[f"{name}.in_proj_weight"] + p[f"{name}.in_proj_bias"]
    q, k, v = (t.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)
               for t in (qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:]))
    att = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / (d // heads) ** 0.5, axis=-1)
    out = (att @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
    return _linear(p, f"{name}.out_proj", out)


HAND_WRITTEN = ("mlp_small", "mlp_large", "cnn", "transformer")


def _check_written(workload) -> None:
    if workload.name not in HAND_WRITTEN:
        raise Skip(f"no hand-written JAX model of {workload.name} (JAX runs the small workloads "
                   "only)")


def forward(name: str, p: dict, x):
    import jax
    if name in ("mlp_small", "mlp_large"):
        x = jax.nn.relu(_linear(p, "0", x))
        x = jax.nn.relu(_linear(p, "2", x))
        return _linear(p, "4", x)
    if name == "cnn":
        x = _conv_relu_pool(p, "0", x)
        x = _conv_relu_pool(p, "3", x)
        return _linear(p, "7", x.reshape(x.shape[0], -1))
    if name == "transformer":  # post-norm encoder layer, exact (erf) GELU
        x = _layer_norm(p, "0.norm1", x + _self_attention(p, "0.self_attn", x))
        ff = _linear(p, "0.linear2", jax.nn.gelu(_linear(p, "0.linear1", x), approximate=False))
        x = _layer_norm(p, "0.norm2", x + ff)
        return _linear(p, "2", x.mean(axis=1))
    raise KeyError(f"unknown workload {name!r}")


def _cross_entropy(logits, y):
    import jax
    import jax.numpy as jnp
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.sum(logp * jax.nn.one_hot(y, CLASSES, dtype=logp.dtype), axis=-1))


def train_jit(workload, x, y, weights) -> Prepared:
    import jax
    import jax.numpy as jnp
    _check_written(workload)

    def loss_fn(p, xb, yb):
        return _cross_entropy(forward(workload.name, p, xb), yb)

    def update(p, buf, xb, yb):
        loss, g = jax.value_and_grad(loss_fn)(p, xb, yb)
        buf = {k: MOMENTUM * buf[k] + g[k] for k in p}
        return {k: p[k] - LR * buf[k] for k in p}, buf, loss

    jax.clear_caches()  # a cold compile, as for every system's first call
    jitted = jax.jit(update, donate_argnums=(0, 1))
    params = jax_layout(weights)
    state = [params, {k: jnp.zeros(v.shape, v.dtype) for k, v in params.items()}]
    xb, yb = jnp.asarray(x), jnp.asarray(y)

    def step():
        out = jax.block_until_ready(jitted(state[0], state[1], xb, yb))
        state[0], state[1] = out[0], out[1]
        return out[2]
    seconds, loss = first_call(step)
    return Prepared(step, seconds, float(loss))


def infer_jit(workload, x, weights) -> Prepared:
    import jax
    import jax.numpy as jnp
    _check_written(workload)
    jax.clear_caches()
    jitted = jax.jit(lambda p, xb: forward(workload.name, p, xb))
    params = jax_layout(weights)
    xb = jnp.asarray(x)

    def run():
        return jax.block_until_ready(jitted(params, xb))
    seconds, out = first_call(run)
    return Prepared(run, seconds, out)


SYSTEMS = [
    System("jax_jit", "JAX jit", train_jit, infer_jit, requires=("jax",),
           notes="hand-written model; donated params/momentum; SGD update inside the jit"),
]
