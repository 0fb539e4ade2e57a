"""`nn.init`: PyTorch's weight initialisers. Each fills a tensor in place under `no_grad` and returns
it; the random ones draw from the default generator of the tensor's device, or from `generator`."""
from __future__ import annotations

import math

from dualflow.device import xp_of
from dualflow.grad_mode import no_grad
from dualflow.ops import random as _random
from dualflow.tensor import Tensor

_GAINS = {"linear": 1.0, "conv1d": 1.0, "conv2d": 1.0, "conv3d": 1.0, "conv_transpose1d": 1.0,
          "conv_transpose2d": 1.0, "conv_transpose3d": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3,
          "relu": math.sqrt(2.0), "selu": 3.0 / 4}


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended scale for weights feeding `nonlinearity` (PyTorch's table)."""
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity not in _GAINS:
        raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")
    return _GAINS[nonlinearity]


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         f"dimensions (got shape {tuple(tensor.shape)})")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _fill_from(tensor: Tensor, values: Tensor) -> Tensor:
    with no_grad():
        tensor.copy_(values)
    return tensor


def _draw(op, tensor: Tensor, generator, shape=None, **attrs) -> Tensor:
    return op(shape=tuple(tensor.shape if shape is None else shape), dtype=tensor.dtype,
              device=tensor.device, generator=generator, **attrs)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with U(a, b)."""
    return _fill_from(tensor, _draw(_random.uniform, tensor, generator, low=float(a),
                                    high=float(b)))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with N(mean, std²)."""
    return _fill_from(tensor, _draw(_random.normal, tensor, generator, mean=float(mean),
                                    std=float(std)))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Fill with N(mean, std²) restricted to [a, b] (out-of-range draws are redrawn)."""
    if not a < b:
        raise ValueError(f"trunc_normal_: expected a < b, got a={a}, b={b}")
    z = ((a - mean) / std, (b - mean) / std)
    accept = 0.5 * (math.erf(z[1] / math.sqrt(2)) - math.erf(z[0] / math.sqrt(2)))
    if accept < 1e-4:
        raise ValueError(f"trunc_normal_: [a, b] = [{a}, {b}] holds too little of "
                         f"N({mean}, {std}²) to sample from")
    values = _draw(_random.normal, tensor, generator, mean=float(mean), std=float(std))
    data = values._data
    outside = (data < a) | (data > b)
    count = int(outside.sum())
    while count:
        redraw = _draw(_random.normal, tensor, generator, shape=(count,), mean=float(mean),
                       std=float(std))
        data[outside] = redraw._data
        outside = (data < a) | (data > b)
        count = int(outside.sum())
    return _fill_from(tensor, values)


def constant_(tensor: Tensor, val: float) -> Tensor:
    with no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity (ones on the diagonal)."""
    if tensor.ndim != 2:
        raise ValueError(f"eye_: only 2-D tensors are supported, got shape {tuple(tensor.shape)}")
    from dualflow.creation import eye
    return _fill_from(tensor, eye(*tensor.shape, dtype=tensor.dtype, device=tensor.device))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot: U(-r, r) with r = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot: N(0, std²) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He: U(-b, b) with b = gain * sqrt(3 / fan)."""
    if tensor.numel() == 0:
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He: N(0, std²) with std = gain / sqrt(fan)."""
    if tensor.numel() == 0:
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def layer_default_(weight: Tensor, bias: Tensor | None) -> None:
    """PyTorch's default for Linear and Conv layers: W ~ kaiming_uniform(a=√5), which is
    U(±1/√fan_in), and b ~ U(±1/√fan_in) (left alone when fan_in is 0)."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        if fan_in > 0:
            uniform_(bias, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix from the QR decomposition of a Gaussian one, times `gain`;
    dimensions after the first are flattened."""
    if tensor.ndim < 2:
        raise ValueError("orthogonal_: only tensors with 2 or more dimensions are supported, got "
                         f"shape {tuple(tensor.shape)}")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    gauss = _draw(_random.normal, tensor, generator, shape=(rows, cols))._data
    xp = xp_of(gauss)
    flat = gauss.T if rows < cols else gauss
    q, r = xp.linalg.qr(flat.astype("float64"))
    q = q * xp.sign(xp.diagonal(r))
    q = (q.T if rows < cols else q) * gain
    return _fill_from(tensor, Tensor._wrap(q.astype(gauss.dtype).reshape(tensor.shape)))

