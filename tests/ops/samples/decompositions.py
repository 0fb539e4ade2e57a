"""Samples of the decompositions. Cholesky and eigh read one triangle of A but return PyTorch's
symmetric gradient, which finite differences of single entries do not see: their gradients
(and pinv's with hermitian=True) are checked on symmetric parametrizations in
tests/ops/test_linalg_decompositions.py. The
factors of qr/svd/eigh are compared through sign-free products (Q R, U diag(S) Vh, ...)."""
import numpy as np

from ..sample import Sample, rnd


def _spd(*shape, seed=0):
    x = rnd(*shape, seed=seed)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def _check_cholesky_ex(outs, a, upper):
    low, info = outs
    np.testing.assert_array_equal(info, [0, 1])
    np.testing.assert_allclose(low[0], np.linalg.cholesky(a[0]), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(low[1], 0)


def _check_qr(outs, a, mode):
    q, r = outs
    np.testing.assert_allclose(np.triu(r), r, atol=0)
    if mode == "r":
        assert q.shape == (0,)
        np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(a, mode="r")), rtol=1e-4,
                                   atol=1e-5)
        return
    np.testing.assert_allclose(q @ r, a, rtol=1e-4, atol=1e-5)
    eye = np.eye(q.shape[-1])
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(eye, q.shape[:-2] + eye.shape),
                               atol=1e-5)


def _check_eigh(outs, a, uplo):
    w, v = outs
    full = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2) if uplo == "L" else \
        np.triu(a) + np.swapaxes(np.triu(a, 1), -1, -2)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(full), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose((v * w[..., None, :]) @ np.swapaxes(v, -1, -2), full, rtol=1e-4,
                               atol=1e-5)


def _check_svd(outs, a, full_matrices):
    u, s, vh = outs
    k = s.shape[-1]
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a, rtol=1e-4,
                               atol=1e-5)
    assert u.shape[-1] == (a.shape[-2] if full_matrices else k)



SAMPLES = {
    "cholesky": [Sample((_spd(3, 3),), {"upper": False}, np.linalg.cholesky, grad=False, label="lower"),
                 Sample((_spd(2, 4, 4),), {"upper": True},
                        lambda a, upper: np.swapaxes(np.linalg.cholesky(a), -1, -2), grad=False,
                        label="batch_upper")],
    "cholesky_ex": [Sample((np.stack([_spd(3, 3), -_spd(3, 3, seed=1)]),), {"upper": False},
                           check=_check_cholesky_ex, grad=False, label="batch_one_failing")],
    "qr": [Sample((rnd(4, 3),), {"mode": "reduced"}, check=_check_qr, label="tall"),
           Sample((rnd(2, 3, 5),), {"mode": "reduced"}, check=_check_qr, label="wide"),
           Sample((rnd(2, 3, 3),), {"mode": "complete"}, check=_check_qr, label="batch_square"),
           Sample((rnd(3, 5),), {"mode": "r"}, check=_check_qr, grad=False, label="wide_r")],
    "eigh": [Sample((rnd(3, 3),), {"uplo": "L"}, check=_check_eigh, grad=False, label="lower"),
             Sample((rnd(2, 4, 4),), {"uplo": "U"}, check=_check_eigh, grad=False, label="batch_upper")],
    "svd": [Sample((rnd(4, 3),), {"full_matrices": False}, check=_check_svd, label="tall"),
            Sample((rnd(2, 3, 5),), {"full_matrices": False}, check=_check_svd, label="batch_wide"),
            # U's last columns are an arbitrary basis (their gradient is ignored, as in PyTorch)
            Sample((rnd(4, 2),), {"full_matrices": True}, check=_check_svd, grad=False,
                   label="full")],
    "pinv": [Sample((rnd(4, 3),), {"atol": 0.0, "rtol": 1e-12, "hermitian": False},
                    lambda a, atol, rtol, hermitian: np.linalg.pinv(a), label="tall"),
             Sample((rnd(2, 2, 5),), {"atol": 0.0, "rtol": 1e-12, "hermitian": False},
                    lambda a, atol, rtol, hermitian: np.linalg.pinv(a), label="batch_wide"),
             Sample((_spd(3, 3),), {"atol": 0.0, "rtol": 1e-12, "hermitian": True},
                    lambda a, atol, rtol, hermitian: np.linalg.inv(a), grad=False,
                    label="hermitian")],
}
