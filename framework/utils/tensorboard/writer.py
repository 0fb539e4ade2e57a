"""`SummaryWriter` (PyTorch's): summaries written to event files by TensorBoard's own writer."""
from __future__ import annotations

import os
import socket
import time
from datetime import datetime

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from . import summaries


class SummaryWriter:
    """Writes an event file under `log_dir` (default `runs/<date>_<host><comment>`) that
    TensorBoard reads. `add_scalars` and `add_hparams` write runs in sub-folders, as PyTorch's."""

    def __init__(self, log_dir: str | None = None, comment: str = "", max_queue: int = 10,
                 flush_secs: int = 120, filename_suffix: str = ""):
        if log_dir is None:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        self._options = (max_queue, flush_secs, filename_suffix)
        self._writer: EventFileWriter | None = EventFileWriter(self.log_dir, *self._options)
        self._runs: dict = {}   # sub-folder -> EventFileWriter (add_scalars, add_hparams)

    def get_logdir(self) -> str:
        return self.log_dir

    # ---- writing ---------------------------------------------------------------------------
    def _file(self) -> EventFileWriter:
        if self._writer is None:
            raise RuntimeError(f"SummaryWriter({self.log_dir!r}) is closed")
        return self._writer

    def _run(self, folder: str) -> EventFileWriter:
        self._file()
        if folder not in self._runs:
            self._runs[folder] = EventFileWriter(folder, *self._options)
        return self._runs[folder]

    @staticmethod
    def _event(summary, global_step, walltime) -> Event:
        return Event(summary=summary, step=int(global_step or 0),
                     wall_time=time.time() if walltime is None else float(walltime))

    def _add(self, summary, global_step=None, walltime=None) -> None:
        self._file().add_event(self._event(summary, global_step, walltime))

    # ---- summaries -------------------------------------------------------------------------
    def add_scalar(self, tag: str, scalar_value, global_step: int | None = None,
                   walltime: float | None = None) -> None:
        self._add(summaries.scalar(tag, scalar_value), global_step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict, global_step: int | None = None,
                    walltime: float | None = None) -> None:
        """Each curve in its own run `<log_dir>/<main_tag>_<tag>`, all under tag `main_tag`,
        so TensorBoard draws them on one chart."""
        for tag, value in tag_scalar_dict.items():
            folder = os.path.join(self.log_dir, f"{main_tag}_{tag}".replace("/", "_"))
            self._run(folder).add_event(self._event(summaries.scalar(main_tag, value),
                                                    global_step, walltime))

    def add_histogram(self, tag: str, values, global_step: int | None = None,
                      bins="tensorflow", walltime: float | None = None) -> None:
        self._add(summaries.histogram(tag, values, bins), global_step, walltime)

    def add_image(self, tag: str, img_tensor, global_step: int | None = None,
                  walltime: float | None = None, dataformats: str = "CHW") -> None:
        self._add(summaries.image(tag, img_tensor, dataformats), global_step, walltime)

    def add_text(self, tag: str, text_string: str, global_step: int | None = None,
                 walltime: float | None = None) -> None:
        self._add(summaries.text(tag, text_string), global_step, walltime)

    def add_hparams(self, hparam_dict: dict, metric_dict: dict,
                    hparam_domain_discrete: dict | None = None, run_name: str | None = None,
                    global_step: int | None = None) -> None:
        """One run (sub-folder `run_name`, default the time) holding the hyper-parameters and
        the metrics as scalars: a row of TensorBoard's HPARAMS table."""
        if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
            raise TypeError("add_hparams: hparam_dict and metric_dict must be dicts")
        run = self._run(os.path.join(self.log_dir, run_name or str(time.time())))
        for summary in summaries.hparams(hparam_dict, metric_dict, hparam_domain_discrete):
            run.add_event(self._event(summary, global_step, None))
        for tag, value in metric_dict.items():
            run.add_event(self._event(summaries.scalar(tag, value), global_step, None))

    def add_graph(self, model, input_to_model=None, verbose: bool = False) -> None:
        """The compiled IR of `model` (a Module traced on `input_to_model`, or an nn.Graph) as
        a TensorBoard graph, module scopes as name scopes (see dualflow.export.tensorboard)."""
        from dualflow.export.tensorboard import graph_def
        graph = graph_def(model, input_to_model)
        if verbose:
            print(graph)
        self._file().add_event(Event(graph_def=graph.SerializeToString(), wall_time=time.time()))

    # ---- lifetime --------------------------------------------------------------------------
    def flush(self) -> None:
        for w in [self._file(), *self._runs.values()]:
            w.flush()

    def close(self) -> None:
        if self._writer is None:
            return
        for w in [self._writer, *self._runs.values()]:
            w.close()
        self._writer, self._runs = None, {}

    def __enter__(self) -> "SummaryWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
