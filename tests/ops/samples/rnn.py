"""The recurrent sequence ops against textbook loops over time (float64 NumPy); the backward ops
against central finite differences of those loops (the VJP by its definition)."""
import numpy as np

from ..sample import Sample, rnd


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def _order(T, reverse):
    return range(T - 1, -1, -1) if reverse else range(T)


def ref_lstm(x, h, c, w_ih, w_hh, b_ih=None, b_hh=None, reverse=False, save=False):
    H, ys = h.shape[1], np.zeros(x.shape[:2] + h.shape[1:])
    saved = np.zeros(x.shape[:2] + (5 * H,))
    for t in _order(len(x), reverse):
        z = x[t] @ w_ih.T + h @ w_hh.T + (0 if b_ih is None else b_ih + b_hh)
        i, f, g, o = _sigmoid(z[:, :H]), _sigmoid(z[:, H:2 * H]), np.tanh(z[:, 2 * H:3 * H]), \
            _sigmoid(z[:, 3 * H:])
        c = f * c + i * g
        h = o * np.tanh(c)
        ys[t], saved[t] = h, np.concatenate([i, f, g, o, c], 1)
    return (ys, h, c, saved) if save else (ys, h, c)


def ref_gru(x, h, w_ih, w_hh, b_ih=None, b_hh=None, reverse=False, save=False):
    H, ys = h.shape[1], np.zeros(x.shape[:2] + h.shape[1:])
    saved = np.zeros(x.shape[:2] + (4 * H,))
    for t in _order(len(x), reverse):
        a = x[t] @ w_ih.T + (0 if b_ih is None else b_ih)
        b = h @ w_hh.T + (0 if b_hh is None else b_hh)
        r, z = _sigmoid(a[:, :H] + b[:, :H]), _sigmoid(a[:, H:2 * H] + b[:, H:2 * H])
        n = np.tanh(a[:, 2 * H:] + r * b[:, 2 * H:])
        h = (1 - z) * n + z * h
        ys[t], saved[t] = h, np.concatenate([r, z, n, b[:, 2 * H:]], 1)
    return (ys, h, saved) if save else (ys, h)


def ref_rnn(x, h, w_ih, w_hh, b_ih=None, b_hh=None, reverse=False, nonlinearity="tanh"):
    act = np.tanh if nonlinearity == "tanh" else (lambda v: np.maximum(v, 0))
    ys = np.zeros(x.shape[:2] + h.shape[1:])
    for t in _order(len(x), reverse):
        h = act(x[t] @ w_ih.T + h @ w_hh.T + (0 if b_ih is None else b_ih + b_hh))
        ys[t] = h
    return ys, h


def _forward_ref(ref, **fixed):
    return lambda *arrays, **attrs: ref(*arrays, **attrs, **fixed)


def _fd_backward(ref, n_states, biases, save, eps=1e-6):
    """The reference of a backward op: d/d(x, states, w_ih, w_hh, b_ih, b_hh) of
    sum(gradient * output) over the outputs of `ref` (a 0-d gradient: none), by central
    differences in float64. y and saved are the forward's at these inputs, so the recomputation
    ignores them; the biases are the sample's (the backward op does not read them)."""
    n_grads = 1 + n_states + int(save)

    def backward(*arrays, reverse, **attrs):
        grads, rest = arrays[:n_grads], arrays[n_grads:]
        params = [np.array(a, dtype=np.float64) for a in rest[:3 + n_states]] + \
            [np.array(b, dtype=np.float64) for b in biases]
        extra = {"save": True} if save else {}

        def loss():
            outs = ref(*params, reverse=reverse, **attrs, **extra)
            return sum(float((g * o).sum()) for g, o in zip(grads, outs) if np.ndim(g))
        result = []
        for p in params:
            d = np.zeros_like(p)
            for k in np.ndindex(p.shape):
                keep = p[k]
                p[k] = keep + eps
                up = loss()
                p[k] = keep - eps
                d[k] = (up - loss()) / (2 * eps)
                p[k] = keep
            result.append(d)
        return tuple(result)
    return backward


T, B, I, H = 3, 2, 3, 2


def _weights(gates, seed, bias=True):
    w = (rnd(gates * H, I, seed=seed), rnd(gates * H, H, seed=seed + 1))
    return w + ((rnd(gates * H, seed=seed + 2), rnd(gates * H, seed=seed + 3)) if bias else ())


def _layer_samples(ref, n_states, gates, save, extra_attrs=({},)):
    x = rnd(T, B, I, seed=1)
    states = tuple(rnd(B, H, seed=10 + k) for k in range(n_states))
    out = []
    for attrs in extra_attrs:
        for reverse in (False, True):
            a = {"reverse": reverse, **attrs}
            out.append(Sample((x, *states, *_weights(gates, 3)), a,
                              _forward_ref(ref, **({"save": True} if save else {})),
                              label=f"{'reverse' if reverse else 'forward'}"
                                    f"{'-' + attrs['nonlinearity'] if attrs else ''}"))
        out.append(Sample((x[:1], *states, *_weights(gates, 5, bias=False)), {"reverse": False,
                          **attrs}, _forward_ref(ref, **({"save": True} if save else {})),
                          label=f"one-step-no-bias{'-' + attrs['nonlinearity'] if attrs else ''}"))
    return out


def _backward_samples(ref, n_states, gates, save, attrs=None):
    """Gradients of every output, and of y alone (the others 0-d: none received)."""
    x = rnd(2, 1, I, seed=2)  # batch 1: differentiating the composite costs a run per element
    states = tuple(rnd(1, H, seed=20 + k) for k in range(n_states))
    out = []
    for reverse, only_y in ((False, False), (True, True)):
        a = {"reverse": reverse, **(attrs or {})}
        weights = _weights(gates, 7)
        fwd = ref(x, *states, *weights, **a, **({"save": True} if save else {}))
        grads = tuple(rnd(*o.shape, seed=30 + k) if k == 0 or not only_y else np.zeros(())
                      for k, o in enumerate(fwd))
        inputs = (*grads, x, *states, *weights[:2], fwd[0], *((fwd[-1],) if save else ()))
        y_at = len(grads) + 3 + n_states
        # Each element differentiated costs a run of the composite, so the two samples share
        # the inputs: all gradients, the later states, w_hh, y and saved in one; gy, x, h0,
        # w_ih, w_hh and saved in the other. A relu RNN's backward steps where y is 0 (relu's
        # kink): y is not differentiated there.
        x_at = len(grads)
        shared = {x_at, x_at + 1, y_at - 2} if not only_y else \
            set(range(1, len(grads))) | set(range(x_at + 2, x_at + 1 + n_states)) | {y_at}
        if attrs and attrs["nonlinearity"] == "relu":
            shared.add(y_at)
        which = tuple(i for i in range(len(inputs)) if i not in shared)
        out.append(Sample(inputs, a, _fd_backward(ref, n_states, weights[2:], save),
                          grad_inputs=which, rtol=1e-5, atol=1e-7,
                          label=("reverse-y-only" if only_y else "forward-all-outputs")))
    return out


SAMPLES = {
    "lstm_layer": _layer_samples(ref_lstm, 2, 4, False),
    "lstm_layer_train": _layer_samples(ref_lstm, 2, 4, True),
    "lstm_layer_backward": _backward_samples(ref_lstm, 2, 4, True),
    "gru_layer": _layer_samples(ref_gru, 1, 3, False),
    "gru_layer_train": _layer_samples(ref_gru, 1, 3, True),
    "gru_layer_backward": _backward_samples(ref_gru, 1, 3, True),
    "rnn_layer": _layer_samples(ref_rnn, 1, 1, False, ({"nonlinearity": "tanh"},
                                                        {"nonlinearity": "relu"})),
    "rnn_layer_backward": (_backward_samples(ref_rnn, 1, 1, False, {"nonlinearity": "tanh"}) +
                           _backward_samples(ref_rnn, 1, 1, False, {"nonlinearity": "relu"})),
}
