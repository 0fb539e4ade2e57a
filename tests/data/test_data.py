"""utils.data: datasets, samplers, collate and the DataLoader (ordering, shuffling, batching)."""
from collections import namedtuple

import numpy as np
import pytest

import dualflow as flow
from dualflow.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset,
                                 IterableDataset, RandomSampler, SequentialSampler, Subset,
                                 SubsetRandomSampler, TensorDataset, default_collate,
                                 random_split)


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i

    def __len__(self):
        return self.n


def _gen(seed=0):
    return flow.Generator().manual_seed(seed)


def _ids(loader):
    return [b.tolist() for b in loader]


# ---- datasets --------------------------------------------------------------------------------
def test_tensor_dataset_indexes_every_tensor():
    x = flow.arange(12, dtype=flow.float32).reshape(4, 3)
    y = flow.tensor([0, 1, 0, 1])
    ds = TensorDataset(x, y)
    assert len(ds) == 4
    xi, yi = ds[2]
    assert xi.tolist() == [6.0, 7.0, 8.0] and yi.item() == 0
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(x, flow.zeros(3))


def test_subset_concat_and_add():
    ds = Squares(5) + Squares(3)
    assert isinstance(ds, ConcatDataset) and len(ds) == 8
    assert [ds[i] for i in range(8)] == [0, 1, 4, 9, 16, 0, 1, 4]
    assert ds[-1] == 4 and ds[-8] == 0
    with pytest.raises(IndexError):
        ds[8]
    sub = Subset(Squares(10), [9, 2, 4])
    assert len(sub) == 3 and [sub[i] for i in range(3)] == [81, 4, 16]


@pytest.mark.parametrize("lengths,sizes", [([3, 7], [3, 7]), ([0.5, 0.3, 0.2], [5, 3, 2]),
                                           ([0.33, 0.33, 0.34], [4, 3, 3])])
def test_random_split_sizes_and_disjointness(lengths, sizes):
    parts = random_split(Squares(10), lengths, generator=_gen(3))
    assert [len(p) for p in parts] == sizes
    indices = [i for p in parts for i in p.indices]
    assert sorted(indices) == list(range(10))             # disjoint and complete
    assert indices != list(range(10))                     # shuffled
    again = random_split(Squares(10), lengths, generator=_gen(3))
    assert [p.indices for p in again] == [p.indices for p in parts]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(Squares(10), [3, 3])


# ---- samplers --------------------------------------------------------------------------------
def test_samplers():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    perm = list(RandomSampler(range(6), generator=_gen(1)))
    assert sorted(perm) == list(range(6))
    draws = list(RandomSampler(range(3), replacement=True, num_samples=50, generator=_gen(1)))
    assert len(draws) == 50 and set(draws) == {0, 1, 2}
    longer = list(RandomSampler(range(4), num_samples=10, generator=_gen(1)))
    assert len(longer) == 10 and sorted(longer[:4]) == [0, 1, 2, 3]
    assert sorted(SubsetRandomSampler([5, 7, 9], generator=_gen(2))) == [5, 7, 9]
    batches = BatchSampler(range(7), 3, drop_last=False)
    assert list(batches) == [[0, 1, 2], [3, 4, 5], [6]] and len(batches) == 3
    assert list(BatchSampler(range(7), 3, drop_last=True)) == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="batch_size"):
        BatchSampler(range(7), 0, drop_last=False)


# ---- DataLoader ------------------------------------------------------------------------------
def test_sequential_batches_and_drop_last():
    loader = DataLoader(Squares(7), batch_size=3)
    assert _ids(loader) == [[0, 1, 4], [9, 16, 25], [36]] and len(loader) == 3
    loader = DataLoader(Squares(7), batch_size=3, drop_last=True)
    assert _ids(loader) == [[0, 1, 4], [9, 16, 25]] and len(loader) == 2
    batch = next(iter(DataLoader(Squares(7), batch_size=2)))
    assert batch.dtype is flow.int64


def test_shuffle_is_seeded_and_advances_each_epoch():
    def epochs(seed, n=2):
        loader = DataLoader(range(10), batch_size=4, shuffle=True, generator=_gen(seed))
        return [sum(_ids(loader), []) for _ in range(n)]

    first, second = epochs(7)
    assert sorted(first) == list(range(10)) and sorted(second) == list(range(10))
    assert first != list(range(10)) and first != second      # shuffled, and new each epoch
    assert epochs(7) == [first, second]                       # same seed, same orders
    assert epochs(8)[0] != first
    flow.manual_seed(5)
    a = sum(_ids(DataLoader(range(10), batch_size=5, shuffle=True)), [])
    flow.manual_seed(5)
    assert sum(_ids(DataLoader(range(10), batch_size=5, shuffle=True)), []) == a


def test_tensor_dataset_loader_gives_a_list_of_batched_fields():
    x = flow.arange(10, dtype=flow.float32).reshape(5, 2)
    y = flow.tensor([1, 2, 3, 4, 5])
    batches = list(DataLoader(TensorDataset(x, y), batch_size=2))
    assert len(batches) == 3 and isinstance(batches[0], list)
    xb, yb = batches[0]
    assert xb.shape == (2, 2) and xb.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert yb.tolist() == [1, 2] and batches[-1][0].shape == (1, 2)


def test_default_collate_of_tuples_dicts_arrays_and_numbers():
    Point = namedtuple("Point", "x y")
    samples = [{"img": np.full((2, 2), i, dtype=np.float32), "label": i, "w": 0.5 * i,
                "flag": i % 2 == 0, "name": f"s{i}", "pt": Point(i, -i),
                "pair": (np.int32(i), [i, i + 1])} for i in range(3)]
    batch = default_collate(samples)
    assert batch["img"].shape == (3, 2, 2) and batch["img"].dtype is flow.float32
    assert batch["label"].dtype is flow.int64 and batch["label"].tolist() == [0, 1, 2]
    assert batch["w"].dtype is flow.float64 and batch["w"].tolist() == [0.0, 0.5, 1.0]
    assert batch["flag"].dtype is flow.bool and batch["flag"].tolist() == [True, False, True]
    assert batch["name"] == ["s0", "s1", "s2"]
    assert isinstance(batch["pt"], Point) and batch["pt"].y.tolist() == [0, -1, -2]
    first, second = batch["pair"]
    assert first.dtype is flow.int32 and first.tolist() == [0, 1, 2]
    assert [t.tolist() for t in second] == [[0, 1, 2], [1, 2, 3]]
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="default_collate"):
        default_collate([object(), object()])


@pytest.mark.parametrize("batch,dtype,values", [
    ([1, 2.5], flow.float32, [1.0, 2.5]),          # was int64 [1, 2] once
    ([True, 2.5], flow.float32, [1.0, 2.5]),
    ([True, 2], flow.int64, [1, 2]),
    ([True, False], flow.bool, [True, False]),
    ([2.5, 1], flow.float64, [2.5, 1.0]),          # a float first: float64, as PyTorch
    ([3, 4], flow.int64, [3, 4])])
def test_default_collate_of_mixed_numbers_promotes_like_tensor(batch, dtype, values):
    out = default_collate(batch)
    assert out.dtype is dtype and out.tolist() == values
    loaded = next(iter(DataLoader(batch, batch_size=len(batch))))
    assert loaded.dtype is dtype and loaded.tolist() == values


def test_default_collate_of_numbers_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate
    for batch in ([1, 2.5], [True, 2.5], [True, 2], [False, True], [2.5, 1], [0.5, True],
                  [2 ** 40, -1], [(1, 0.5), (2, 1)]):
        ours, theirs = default_collate(batch), torch_collate(batch)
        pairs = zip(ours, theirs) if isinstance(ours, list) else [(ours, theirs)]
        for a, b in pairs:
            assert a.dtype.name == str(b.dtype).replace("torch.", "") and a.tolist() == b.tolist()


def test_custom_collate_batch_sampler_and_no_batching():
    loader = DataLoader(Squares(6), batch_sampler=[[5, 0], [2]], collate_fn=list)
    assert list(loader) == [[25, 0], [4]] and len(loader) == 2
    loader = DataLoader(Squares(3), batch_size=None)
    assert list(loader) == [0, 1, 4]
    arrays = DataLoader([np.ones(2)], batch_size=None)
    assert isinstance(next(iter(arrays)), flow.Tensor)
    loader = DataLoader(Squares(6), sampler=[4, 1], batch_size=2, num_workers=2)
    assert _ids(loader) == [[16, 1]]


def test_loader_argument_conflicts():
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(Squares(3), sampler=[0], shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        DataLoader(Squares(3), batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="drop_last"):
        DataLoader(Squares(3), batch_size=None, drop_last=True)


def test_iterable_dataset_batches():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(5))

        def __len__(self):
            return 5

    loader = DataLoader(Stream(), batch_size=2)
    assert _ids(loader) == [[0, 1], [2, 3], [4]] and len(loader) == 3
    assert _ids(DataLoader(Stream(), batch_size=2, drop_last=True)) == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(Stream(), shuffle=True)


def test_order_matches_torch_for_sequential_loading():
    torch = pytest.importorskip("torch")
    data = [(np.arange(3) * i, float(i)) for i in range(7)]
    theirs = list(torch.utils.data.DataLoader(data, batch_size=3, drop_last=False))
    ours = list(DataLoader(data, batch_size=3))
    assert len(ours) == len(theirs)
    for (xa, ya), (xb, yb) in zip(ours, theirs):
        np.testing.assert_array_equal(xa.numpy(), xb.numpy())
        assert xa.dtype.name == str(xb.dtype).replace("torch.", "")
        assert ya.dtype.name == str(yb.dtype).replace("torch.", "")
