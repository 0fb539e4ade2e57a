"""The process group: which communicator collectives use, this process's rank and the world size.

The default group is the world, as MPI's launcher starts it (`mpiexec -n 4 python train.py`): rank
and size come from the launcher (subgroups: `groups.py`). On initialisation an uncaught exception on any rank aborts every
rank (MPI_Abort), so one failing process ends the job with an error instead of leaving the others
blocked in a collective forever; and a rank that leaves — `destroy_process_group`, or the end of
its program without it — tells the others, so those waiting in a collective raise at once
(`agreement.py`)."""
from __future__ import annotations

import atexit
import contextlib
import sys
import time
import traceback
from datetime import timedelta

from . import watchdog
from .agreement import DistBackendError

_backend = None
_previous_excepthook = None


class _World:
    """`group.WORLD`: the default group; collectives accept it (or None) as `group=`."""

    def __repr__(self) -> str:
        return "<dualflow.distributed.group.WORLD>"


class group:  # noqa: N801  (PyTorch's spelling: dist.group.WORLD)
    WORLD = _World()


DEFAULT_TIMEOUT = timedelta(minutes=30)   # PyTorch's default for its process groups


def init_process_group(backend: str = "mpi", init_method: str | None = None,
                       timeout: timedelta | float | None = DEFAULT_TIMEOUT,
                       world_size: int = -1, rank: int = -1, **kwargs) -> None:
    """Join the job the MPI launcher started. `world_size`/`rank`, when given, must match it.
    `timeout` (a timedelta or seconds; None: wait forever): a collective not completed that long
    after a rank began waiting for it aborts the job (`watchdog.py`)."""
    global _backend
    if _backend is not None:
        raise RuntimeError("init_process_group: the default process group is already initialized "
                           "(call destroy_process_group first)")
    if init_method not in (None, "env://", "mpi://"):
        raise ValueError(f"init_process_group: init_method {init_method!r} is not supported; "
                         f"rank and world size come from the MPI launcher (mpiexec)")
    seconds = None if timeout is None else (
        timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout))
    if seconds is not None and seconds <= 0:
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout!r}")
    _backend = _make_backend(backend)
    for name, given, actual in (("world_size", world_size, _backend.size),
                                ("rank", rank, _backend.rank)):
        if given not in (-1, None) and given != actual:
            chosen, _backend = _backend, None
            chosen.close()
            raise ValueError(f"init_process_group: {name}={given}, but the launcher started this "
                             f"process with {name} {actual}")
    _install_abort_on_error()
    atexit.register(_leave_at_exit)
    if seconds is not None:
        watchdog.active = watchdog.Watchdog(seconds, _backend.rank, _backend.abort)


def _make_backend(name: str):
    name = str(name).lower()
    if name == "mpi":
        from .mpi_backend import MPIBackend
        return MPIBackend()
    if name == "nccl":
        from .nccl_backend import NCCLBackend
        return NCCLBackend()
    raise ValueError(f"init_process_group: unknown backend {name!r}; dualflow has 'mpi' (CPU "
                     f"and GPU arrays through host memory) and 'nccl' (CuPy on NVIDIA GPUs)")


def _abort_on_error(kind, value, tb) -> None:
    """sys.excepthook while a group is up: report the error, then end every rank."""
    if _backend is None:
        _previous_excepthook(kind, value, tb)
        return
    sys.stderr.write(f"[rank {_backend.rank}] uncaught exception; aborting all ranks\n")
    traceback.print_exception(kind, value, tb)
    sys.stderr.flush()
    time.sleep(0.5)   # let the launcher forward the traceback before the abort
    _backend.abort(1)


def _install_abort_on_error() -> None:
    global _previous_excepthook
    _previous_excepthook = sys.excepthook
    sys.excepthook = _abort_on_error


def leave(communicators: list) -> None:
    """Announce on each communicator that this rank leaves it, all at once, then wait until
    every other member has left too or has seen the announcement (its collective raises)."""
    works = [c.leave() for c in communicators if hasattr(c, "leave")]
    for work in works:
        if work is not None:
            with contextlib.suppress(DistBackendError):   # a peer waiting in a collective
                work.wait()


def _leave_at_exit() -> None:
    """The program ends without destroy_process_group: still tell the others."""
    from .groups import _groups   # here: groups.py imports this module
    if _backend is not None:
        leave([g.comm for g in _groups] + [_backend])


def destroy_process_group(group=None) -> None:
    """Free `group` (a new_group), or, by default, the world and every group."""
    global _backend
    from .groups import ProcessGroup, _groups, destroy_groups
    if isinstance(group, ProcessGroup):
        if group in _groups:
            leave([group.comm])
        destroy_groups(group)
        return
    check_group(group, "destroy_process_group")
    if _backend is None:
        raise RuntimeError("destroy_process_group: no process group is initialized")
    leave([g.comm for g in _groups] + [_backend])
    destroy_groups()
    atexit.unregister(_leave_at_exit)
    if watchdog.active is not None:
        watchdog.active.stop()
        watchdog.active = None
    _backend.close()
    _backend = None
    if sys.excepthook is _abort_on_error:
        sys.excepthook = _previous_excepthook


def is_initialized() -> bool:
    return _backend is not None


def is_available() -> bool:
    """Whether MPI (mpi4py) can be imported, i.e. `init_process_group('mpi')` can work."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def backend(where: str = "distributed"):
    if _backend is None:
        raise RuntimeError(f"{where}: the default process group is not initialized; call "
                           f"dualflow.distributed.init_process_group() first")
    return _backend


def check_group(group, where: str) -> None:
    """For what runs on the world only (DistributedDataParallel, ZeRO, checkpoints)."""
    if group is not None and not isinstance(group, _World):
        raise ValueError(f"{where}: only the world group is supported (group=None)")


def get_rank(group=None) -> int:
    """This process's rank in `group` (the world by default); -1 when it is no member."""
    from .groups import GroupMember, communicator
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return communicator(group, "get_rank").rank


def get_world_size(group=None) -> int:
    from .groups import communicator
    return communicator(group, "get_world_size").size


def get_backend(group=None) -> str:
    check_group(group, "get_backend")
    return backend("get_backend").name
