"""Run under `mpiexec -n N`: every collective against the values NumPy says it must give."""
import numpy as np

import dualflow as flow
import dualflow.distributed as dist


def check(got, want, what):
    if not np.array_equal(np.asarray(got), np.asarray(want)):
        raise AssertionError(f"rank {dist.get_rank()}: {what}: got {got}, want {want}")


def check_groups(r, n):
    """new_group: members of the evens and of the odds reduce among themselves."""
    odds, evens = list(range(1, n, 2)), list(range(0, n, 2))
    odd, even = dist.new_group(odds), dist.new_group(evens)   # every rank calls both
    mine, members, other = (even, evens, odd) if r % 2 == 0 else (odd, odds, even)
    check(other is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(other) == -1, True,
          "the other group is not ours")
    check((dist.get_rank(mine), dist.get_world_size(mine)), (members.index(r), len(members)),
          "rank and size in the group")
    t = flow.full((2,), float(r))
    dist.all_reduce(t, group=mine)
    check(t.numpy(), [float(sum(members))] * 2, "all_reduce in a group")
    t = flow.full((2,), float(r))
    dist.broadcast(t, members[-1], group=mine)   # src is a world rank, as in PyTorch
    check(t.numpy(), [float(members[-1])] * 2, "broadcast in a group")
    box = [r]
    dist.broadcast_object_list(box, src=members[0], group=mine)
    check(box[0], members[0], "broadcast_object_list in a group")
    if len(members) > 1 and r in members[:2]:
        if r == members[0]:
            dist.send(flow.full((1,), float(r)), members[1], group=mine)
        else:
            check(dist.recv(flow.zeros(1), members[0], group=mine), members[0],
                  "recv in a group reports the world rank")
    try:
        dist.broadcast(t, next(k for k in range(n) if k not in members), group=mine)
    except ValueError as e:
        check("is not a member" in str(e), True, "broadcast from a non-member")
    else:
        raise AssertionError("a broadcast from a non-member was not refused")
    dist.barrier(group=mine)
    dist.destroy_process_group(mine)
    try:
        dist.all_reduce(t, group=mine)
    except RuntimeError as e:
        check("destroyed" in str(e), True, "a destroyed group")


def main():
    dist.init_process_group("mpi")
    r, n = dist.get_rank(), dist.get_world_size()
    ranks = np.arange(n, dtype=np.float64)
    for dtype in (flow.float64, flow.float32, flow.float16, flow.bfloat16, flow.int64):
        t = flow.full((3,), r + 1, dtype=dtype)
        dist.all_reduce(t)
        check(t.float().numpy(), [(ranks + 1).sum()] * 3, f"all_reduce SUM {dtype}")
    for op, want in ((dist.ReduceOp.MAX, n - 1), (dist.ReduceOp.MIN, 0),
                     (dist.ReduceOp.AVG, ranks.mean()), (dist.ReduceOp.PRODUCT, 0)):
        t = flow.full((2,), float(r), dtype=flow.float64)
        work = dist.all_reduce(t, op, async_op=True)
        work.wait()
        check(t.numpy(), [want] * 2, f"all_reduce {op}")
    flags = flow.tensor([r == 0, False, True])
    dist.all_reduce(flags)
    check(flags.numpy(), [True, False, True], "all_reduce of bools (any)")
    t = flow.full((2, 2), float(r))
    dist.broadcast(t, n - 1)
    check(t.numpy(), np.full((2, 2), n - 1.0), "broadcast")
    out = flow.zeros(n, 2)
    dist.all_gather_into_tensor(out, flow.full((2,), float(r)))
    check(out.numpy(), np.repeat(ranks[:, None], 2, 1), "all_gather_into_tensor")
    pieces = [flow.zeros(3, dtype=flow.int64) for _ in range(n)]
    dist.all_gather(pieces, flow.full((3,), r, dtype=flow.int64))
    check(np.stack([p.numpy() for p in pieces]), np.repeat(np.arange(n)[:, None], 3, 1),
          "all_gather")
    mine = flow.zeros(2, dtype=flow.float64)
    dist.reduce_scatter_tensor(mine, flow.arange(2 * n, dtype=flow.float64) * (r + 1))
    check(mine.numpy(), np.arange(2 * r, 2 * r + 2) * (ranks + 1).sum(), "reduce_scatter_tensor")
    right, left = (r + 1) % n, (r - 1) % n
    if n > 1:
        sent = dist.isend(flow.full((4,), float(r)), right)
        got = flow.zeros(4)
        sender = dist.recv(got)
        sent.wait()
        check(got.numpy(), [left] * 4, "send/recv")
        check(sender, left, "recv's sender")
    box = [{"rank": r}] if r == 0 else [None]
    dist.broadcast_object_list(box, src=0)
    check(box[0]["rank"], 0, "broadcast_object_list")
    check_groups(r, n)
    dist.barrier()
    if r == 0:
        print("collectives ok")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
