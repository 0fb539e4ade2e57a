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


def _packed(ref, n_states, lengths, save=False):
    """`ref` with per-sequence lengths (the op's last input, attr packed=True): each sequence run
    alone over its own steps; outputs past a sequence's length are zeros."""
    def run(*arrays, packed, **attrs):
        (x, *rest), given = arrays[:len(arrays) - 1], arrays[-1]
        assert packed and list(given) == list(lengths)
        states, weights = rest[:n_states], rest[n_states:]
        outs = None
        for b, n in enumerate(lengths):
            one = ref(x[:n, b:b + 1], *(s[b:b + 1] for s in states), *weights, **attrs,
                      **({"save": True} if save else {}))
            if outs is None:
                outs = [np.zeros(x.shape[:2] + o.shape[2:]) if o.ndim == 3
                        else np.zeros((x.shape[1],) + o.shape[1:]) for o in one]
            for full, o in zip(outs, one):
                if o.ndim == 3:
                    full[:n, b] = o[:, 0]
                else:
                    full[b] = o[0]
        return tuple(outs)
    return run


_LENGTHS = np.array([3, 1, 2])


def _packed_samples(ref, n_states, gates, save, extra_attrs=({},)):
    x = rnd(3, 3, I, seed=41)
    states = tuple(rnd(3, H, seed=42 + k) for k in range(n_states))
    return [Sample((x, *states, *_weights(gates, 44, bias), _LENGTHS),
                   {"reverse": reverse, "packed": True, **attrs},
                   _packed(ref, n_states, _LENGTHS, save),
                   label=f"packed-{'reverse' if reverse else 'forward'}"
                         f"{'' if bias else '-no-bias'}"
                         f"{'-' + attrs['nonlinearity'] if attrs else ''}")
            for attrs in extra_attrs for reverse, bias in ((False, True), (True, False))]


def _packed_backward_samples(ref, n_states, gates, save, attrs=None):
    """d/d(everything) of a packed layer, lengths (2, 1): the second sequence stops early."""
    lengths = np.array([2, 1])
    x = rnd(2, 2, I, seed=51)
    states = tuple(rnd(2, H, seed=52 + k) for k in range(n_states))
    out = []
    for reverse in (False, True):
        a = {"reverse": reverse, **(attrs or {})}
        weights = _weights(gates, 55)
        fwd = _packed(ref, n_states, lengths, save)(x, *states, *weights, lengths, packed=True,
                                                    **a)
        grads = tuple(rnd(*o.shape, seed=60 + k) for k, o in enumerate(fwd))
        inputs = (*grads, x, *states, *weights[:2], fwd[0], *((fwd[-1],) if save else ()),
                  lengths)
        x_at = len(grads)
        which = tuple(range(x_at, x_at + 3 + n_states))
        packed_ref = _packed(ref, n_states, lengths)

        def ref_of(*arrays, packed_ref=packed_ref, lengths=lengths, **kw):
            return packed_ref(*arrays, lengths, packed=True, **kw)
        fd = _fd_backward(ref_of, n_states, weights[2:], save)
        out.append(Sample(inputs, {**a, "packed": True},
                          lambda *arrays, fd=fd, **kw: fd(*arrays[:-1], **{
                              k: v for k, v in kw.items() if k != "packed"}),
                          grad_inputs=which, rtol=1e-5, atol=1e-7,
                          label=f"packed-{'reverse' if reverse else 'forward'}"))
    return out


SAMPLES = {
    "lstm_layer": _layer_samples(ref_lstm, 2, 4, False) + _packed_samples(ref_lstm, 2, 4, False),
    "lstm_layer_train": (_layer_samples(ref_lstm, 2, 4, True) +
                         _packed_samples(ref_lstm, 2, 4, True)),
    "lstm_layer_backward": (_backward_samples(ref_lstm, 2, 4, True) +
                            _packed_backward_samples(ref_lstm, 2, 4, True)),
    "gru_layer": _layer_samples(ref_gru, 1, 3, False) + _packed_samples(ref_gru, 1, 3, False),
    "gru_layer_train": _layer_samples(ref_gru, 1, 3, True) + _packed_samples(ref_gru, 1, 3, True),
    "gru_layer_backward": (_backward_samples(ref_gru, 1, 3, True) +
                           _packed_backward_samples(ref_gru, 1, 3, True)),
    "rnn_layer": (_layer_samples(ref_rnn, 1, 1, False, ({"nonlinearity": "tanh"},
                                                         {"nonlinearity": "relu"})) +
                  _packed_samples(ref_rnn, 1, 1, False, ({"nonlinearity": "tanh"},))),
    "rnn_layer_backward": (_backward_samples(ref_rnn, 1, 1, False, {"nonlinearity": "tanh"}) +
                           _backward_samples(ref_rnn, 1, 1, False, {"nonlinearity": "relu"}) +
                           _packed_backward_samples(ref_rnn, 1, 1, False,
                                                    {"nonlinearity": "tanh"})),
}
