"""pygcn (Kipf's GCN in PyTorch): GraphConvolution layers computing adj @ (x W) with
`torch.spmm` on a constant sparse, row-normalized adjacency, as its `utils.load_data` builds
it (`sparse_mx_to_torch_sparse_tensor`). Dropout is 0, so runs of two frameworks draw nothing
random."""
from __future__ import annotations

import math

import numpy as np


def pygcn_classes(fw):
    """(GraphConvolution, GCN) over `fw`."""
    nn, F = fw.nn, fw.nn.functional

    class GraphConvolution(nn.Module):
        def __init__(self, in_features, out_features, bias=True):
            super().__init__()
            self.in_features, self.out_features = in_features, out_features
            self.weight = nn.Parameter(fw.FloatTensor(in_features, out_features))
            self.bias = nn.Parameter(fw.FloatTensor(out_features)) if bias else None
            self.reset_parameters()

        def reset_parameters(self):
            stdv = 1. / math.sqrt(self.weight.size(1))
            self.weight.data.uniform_(-stdv, stdv)
            if self.bias is not None:
                self.bias.data.uniform_(-stdv, stdv)

        def forward(self, input, adj):
            support = fw.mm(input, self.weight)
            output = fw.spmm(adj, support)
            return output + self.bias if self.bias is not None else output

    class GCN(nn.Module):
        def __init__(self, nfeat, nhid, nclass, dropout):
            super().__init__()
            self.gc1 = GraphConvolution(nfeat, nhid)
            self.gc2 = GraphConvolution(nhid, nclass)
            self.dropout = dropout

        def forward(self, x, adj):
            x = F.relu(self.gc1(x, adj))
            x = F.dropout(x, self.dropout, training=self.training)
            x = self.gc2(x, adj)
            return F.log_softmax(x, dim=1)

    return GraphConvolution, GCN


def normalized_adjacency(n: int, edges: int, seed: int) -> np.ndarray:
    """A random undirected graph with self-loops, row-normalized (pygcn's `normalize`), dense."""
    rng = np.random.default_rng(seed)
    adj = np.zeros((n, n))
    for a, b in rng.integers(0, n, (edges, 2)):
        adj[a, b] = adj[b, a] = 1.0
    adj += np.eye(n)
    return adj / adj.sum(1, keepdims=True)


def sparse_tensor(fw, dense: np.ndarray, dtype):
    """pygcn's `sparse_mx_to_torch_sparse_tensor` on the COO form of `dense` (its legacy
    `torch.sparse.FloatTensor` constructor; the values' dtype is kept)."""
    rows, cols = np.nonzero(dense)
    indices = fw.from_numpy(np.vstack((rows, cols)).astype(np.int64))
    values = fw.from_numpy(dense[rows, cols].astype(np.dtype(str(dtype).split(".")[-1])))
    return fw.sparse.FloatTensor(indices, values, fw.Size(dense.shape))
