"""DistributedSampler: shares, padding and shuffling as PyTorch's (no processes needed)."""
import math

import pytest

from dualflow.utils.data import DistributedSampler


def shares(n, replicas, **kw):
    return [list(DistributedSampler(range(n), num_replicas=replicas, rank=r, **kw))
            for r in range(replicas)]


@pytest.mark.parametrize("n,replicas", [(10, 3), (12, 4), (2, 5), (7, 1)])
def test_unshuffled_shares_pad_by_repeating_the_start(n, replicas):
    per = math.ceil(n / replicas)
    padded = (list(range(n)) * math.ceil(per * replicas / n))[:per * replicas]
    assert shares(n, replicas, shuffle=False) == [padded[r::replicas] for r in range(replicas)]
    assert len(DistributedSampler(range(n), num_replicas=replicas, rank=0)) == per


@pytest.mark.parametrize("n,replicas", [(10, 3), (12, 4)])
def test_drop_last_cuts_the_tail(n, replicas):
    got = shares(n, replicas, shuffle=False, drop_last=True)
    per = n // replicas
    assert got == [list(range(n))[:per * replicas][r::replicas] for r in range(replicas)]


def test_shuffled_shares_are_disjoint_cover_the_data_and_change_with_the_epoch():
    samplers = [DistributedSampler(range(20), num_replicas=4, rank=r, seed=3) for r in range(4)]
    first = [list(s) for s in samplers]
    assert sorted(i for share in first for i in share) == list(range(20))
    assert first == [list(s) for s in samplers]          # same epoch: same order
    assert first[0] != list(range(0, 20, 4))             # shuffled
    for s in samplers:
        s.set_epoch(1)
    second = [list(s) for s in samplers]
    assert second != first and sorted(sum(second, [])) == list(range(20))


def test_bad_rank_and_missing_group_are_refused():
    with pytest.raises(ValueError, match="rank should be in the interval"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(range(4))


def test_matches_pytorch_without_shuffle():
    torch = pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    for n, replicas, drop in [(10, 3, False), (10, 3, True), (3, 4, False)]:
        for r in range(replicas):
            ours = DistributedSampler(range(n), replicas, r, shuffle=False, drop_last=drop)
            theirs = TorchSampler(range(n), replicas, r, shuffle=False, drop_last=drop)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)
