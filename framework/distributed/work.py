"""`Work`: the handle an asynchronous collective returns (`async_op=True`), as in PyTorch."""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import watchdog


class Work:
    """A collective in flight. `wait()` blocks until it is done and the tensor holds the result;
    `is_completed()` asks without blocking (and, on MPI, drives the operation's progress)."""

    def __init__(self, wait: Callable[[], None], test: Callable[[], bool],
                 then: Callable[[], object] | None = None):
        self._wait, self._test, self._then = wait, test, then
        self._done = False
        self._result = None

    def wait(self, timeout=None) -> bool:
        """Blocks until done; the process group's watchdog (`timeout` of
        `init_process_group`) ends the job if that takes too long."""
        if not self._done:
            dog = watchdog.active
            if dog is None:
                self._wait()
            else:
                with dog.waiting():
                    self._wait()
            self._finish()
        return True

    def is_completed(self) -> bool:
        if not self._done and self._test():
            self._finish()
        return self._done

    def result(self):
        """What the collective produced beyond its tensors (`recv`: the sender's rank)."""
        self.wait()
        return self._result

    def _finish(self) -> None:
        self._done = True
        if self._then is not None:
            self._result = self._then()
            self._then = None


def completed(result=None) -> Work:
    """A Work that is already done (a collective with nothing to exchange)."""
    work = Work(lambda: None, lambda: True)
    work._done, work._result = True, result
    return work


def staged(comm, arrays: list, run) -> Work:
    """Run `run(*arrays)` on host copies when the communicator wants host memory (MPI) and the
    arrays live on a GPU; the results are copied back into the device arrays when it is done."""
    if comm.name == "nccl" or all(isinstance(a, np.ndarray) for a in arrays):
        return run(*arrays)
    hosts = [a.get() if not isinstance(a, np.ndarray) else a for a in arrays]
    work = run(*hosts)
    inner_then = work._then

    def copy_back():
        result = inner_then() if inner_then is not None else None
        for device, host in zip(arrays, hosts):
            if device is not host:
                device.set(host)
        return result
    work._then = copy_back
    return work
