import numpy as np

from ..sample import Sample, rnd

_MATMUL = [((rnd(2, 3), rnd(3, 4, seed=1)), "2d"), ((rnd(3), rnd(3, seed=1)), "dot"),
           ((rnd(3), rnd(3, 4, seed=1)), "vec_mat"), ((rnd(2, 3), rnd(3, seed=1)), "mat_vec"),
           ((rnd(3), rnd(2, 3, 4, seed=1)), "vec_batch"), ((rnd(2, 2, 3), rnd(3, seed=1)), "batch_vec"),
           ((rnd(2, 1, 2, 3), rnd(4, 3, 2, seed=1)), "batch_broadcast"),
           ((rnd(2, 3), rnd(2, 3, 4, seed=1)), "mat_batch"),
           ((rnd(0, 3), rnd(3, 2, seed=1)), "empty"), ((rnd(2, 0), rnd(0, 3, seed=1)), "k0")]

_EINSUM = [("ij,jk->ik", (rnd(2, 3), rnd(3, 4, seed=1))),
           ("bij,bjk->bik", (rnd(2, 2, 3), rnd(2, 3, 2, seed=1))),
           ("ij->i", (rnd(2, 3),)), ("ij->", (rnd(2, 3),)), ("ij->ji", (rnd(2, 3),)),
           ("i,j->ij", (rnd(3), rnd(2, seed=1))), ("ij,ij->", (rnd(2, 3), rnd(2, 3, seed=1))),
           ("ij,jk,kl->il", (rnd(2, 3), rnd(3, 2, seed=1), rnd(2, 2, seed=2))),
           ("ij,ij->ij", (rnd(1, 3), rnd(4, 3, seed=1))),      # a label broadcast from size 1
           ("ijk,k->ij", (rnd(2, 3, 2), rnd(2, seed=1))),
           ("ij,->ij", (rnd(2, 3), rnd(seed=1))),
           ("ij,jk->ik", (rnd(0, 3), rnd(3, 2, seed=1)))]

SAMPLES = {
    "matmul": [Sample(x, {}, np.matmul, label=label) for x, label in _MATMUL],
    "einsum": [Sample(x, {"equation": eq}, lambda *xs, equation: np.einsum(equation, *xs),
                      label=eq.replace(",", "_").replace("->", "_to_") or "scalar")
               for eq, x in _EINSUM],
}
