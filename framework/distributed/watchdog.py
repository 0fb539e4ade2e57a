"""The process group's `timeout` (PyTorch's `init_process_group(timeout=...)`): a collective that
has not completed that long after a rank began waiting for it ends the whole job with an error.

A rank that raises is handled by the abort-on-error hook (`process_group.py`) and one that
exits by the MPI launcher; this covers the rest: a rank stuck outside MPI (a deadlock, an
endless loop, a collective the others never join). A daemon thread looks at the wait in
progress a few times per timeout and calls MPI_Abort when it has lasted too long."""
from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Callable

active: "Watchdog | None" = None   # the initialized group's watchdog (work.py reads it)


class Watchdog:
    def __init__(self, seconds: float, rank: int, abort: Callable[[int], None]):
        self.seconds, self.rank, self.abort = seconds, rank, abort
        self.since: float | None = None   # when the wait in progress began
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name="dualflow-collective-watchdog")
        self._thread.start()

    @contextlib.contextmanager
    def waiting(self):
        """Around one blocking wait for a collective."""
        self.since = time.monotonic()
        try:
            yield
        finally:
            self.since = None

    def _watch(self) -> None:
        while not self._stop.wait(min(5.0, self.seconds / 4)):
            since = self.since
            if since is not None and time.monotonic() - since > self.seconds:
                sys.stderr.write(f"[rank {self.rank}] a collective did not complete within the "
                                 f"process group's timeout ({self.seconds:g} s); aborting all "
                                 f"ranks\n")
                sys.stderr.flush()
                time.sleep(0.5)   # let the launcher forward the message before the abort
                self.abort(1)
                return

    def stop(self) -> None:
        self._stop.set()
