"""`new_group`: collectives over a subset of the world's ranks (PyTorch's API).

Every rank calls `new_group(ranks)` in the same order, as in PyTorch; MPI splits the world's
communicator, so members get a `ProcessGroup` with a communicator of their own and the other
ranks get `GroupMember.NON_GROUP_MEMBER`. Collectives take it as `group=`; ranks given to them
(`src`, `dst`) are world ranks, as in PyTorch. Groups are eager only: a traced collective and
DistributedDataParallel use the world."""
from __future__ import annotations

from . import process_group


class ProcessGroup:
    """A communicator over `ranks` (world ranks, sorted); this rank is one of them."""

    def __init__(self, comm, ranks: list[int]):
        self.comm, self.ranks = comm, ranks

    def size(self) -> int:
        return len(self.ranks)

    def rank(self) -> int:
        return self.comm.rank

    def __repr__(self) -> str:
        return f"<dualflow.distributed.ProcessGroup ranks={self.ranks}>"


class _NonMember:
    def __repr__(self) -> str:
        return "<dualflow.distributed.GroupMember.NON_GROUP_MEMBER>"


class GroupMember:  # PyTorch's names
    WORLD = process_group.group.WORLD
    NON_GROUP_MEMBER = _NonMember()


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, **kwargs):
    """A group of `ranks` (all by default). Every rank of the world must call it."""
    world = process_group.backend("new_group")
    if not hasattr(world, "split"):
        raise NotImplementedError(f"new_group: the {world.name!r} backend has no subgroups; "
                                  f"use backend='mpi'")
    members = sorted(set(range(world.size) if ranks is None else ranks))
    bad = [r for r in members if not isinstance(r, int) or not 0 <= r < world.size]
    if bad or not members:
        raise ValueError(f"new_group: ranks {ranks!r} are not a non-empty set of ranks of this "
                         f"world of {world.size}")
    comm = world.split(world.rank in members)
    if comm is None:
        return GroupMember.NON_GROUP_MEMBER
    group = ProcessGroup(comm, members)
    _groups.append(group)
    return group


_groups: list[ProcessGroup] = []   # freed by destroy_process_group()


def communicator(group, where: str):
    """The communicator a collective with `group=` runs on."""
    if group is None or group is process_group.group.WORLD:
        return process_group.backend(where)
    if group is GroupMember.NON_GROUP_MEMBER:
        raise RuntimeError(f"{where}: this rank is not a member of the group")
    if isinstance(group, ProcessGroup):
        if group not in _groups:
            raise RuntimeError(f"{where}: {group!r} was destroyed")
        return group.comm
    raise TypeError(f"{where}: group must be None, group.WORLD or a ProcessGroup from "
                    f"new_group(), got {group!r}")


def group_rank(group, rank: int, where: str, name: str) -> int:
    """World rank `rank` as a rank of `group` (an error naming it when it is no member)."""
    if not isinstance(group, ProcessGroup):
        return rank
    if rank not in group.ranks:
        raise ValueError(f"{where}: {name}={rank!r} is not a member of {group!r}")
    return group.ranks.index(rank)


def destroy_groups(group=None) -> None:
    """Free one group's communicator, or all of them (the world is being destroyed)."""
    for g in [group] if group is not None else list(_groups):
        if g in _groups:
            _groups.remove(g)
            g.comm.close()
