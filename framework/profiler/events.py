"""What a session recorded: nesting (self times), averages per key, and PyTorch's summary table."""
from __future__ import annotations

from .recorder import Event


def nest(events: list) -> "EventList":
    """Sort events by thread and start, and give each the time of the ranges directly inside it
    and the bytes allocated anywhere inside it (one thread's ranges nest, so a stack of open
    ranges finds each one's parent)."""
    events = sorted(events, key=lambda e: (e.tid, e.start, -e.end))
    parents: list = []
    stack: list = []
    tid = None
    for e in events:
        if e.tid != tid:
            stack, tid = [], e.tid
        while stack and stack[-1].end <= e.start:
            stack.pop()
        parents.append(stack[-1] if stack else None)
        stack.append(e)
    for e, parent in zip(reversed(events), reversed(parents)):  # a child comes after its parent
        if parent is not None:
            parent.child_ns += e.end - e.start
            parent.child_bytes += e.self_bytes + e.child_bytes
    return EventList(events)


class FunctionEventAvg:
    """The events of one key added up (PyTorch's `FunctionEventAvg`): times in microseconds."""

    def __init__(self, key: str, input_shapes=None, stack=None):
        self.key, self.input_shapes, self.stack = key, input_shapes, stack
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0

    def add(self, e: Event) -> None:
        self.count += 1
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total
        self.cpu_memory_usage += e.cpu_memory_usage
        self.self_cpu_memory_usage += e.self_cpu_memory_usage

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg {self.key} count={self.count} "
                f"cpu_time_total={self.cpu_time_total:.3f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.3f}us>")


SORT_KEYS = ("cpu_time", "cpu_time_total", "self_cpu_time", "self_cpu_time_total",
             "cpu_memory_usage", "self_cpu_memory_usage", "count")


class EventList(list):
    """A list of events (or of their averages) that can be summarised as PyTorch's table."""

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> "EventList":
        """One row per name (and per input shapes / innermost `group_by_stack_n` frames)."""
        rows: dict = {}
        for e in self:
            shapes = e.input_shapes if group_by_input_shape else None
            stack = tuple(e.stack or ())[:group_by_stack_n] if group_by_stack_n else None
            key = (e.name, str(shapes), stack)
            if key not in rows:
                rows[key] = FunctionEventAvg(e.name, shapes, stack)
            rows[key].add(e)
        return EventList(rows.values())

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_name_column_width: int = 55, header: str | None = None) -> str:
        from .table import format_table
        if sort_by is not None and sort_by not in SORT_KEYS:
            raise ValueError(f"table: cannot sort by {sort_by!r}; the keys are "
                             f"{', '.join(SORT_KEYS)} (device times are not measured apart: "
                             "with ProfilerActivity.CUDA the CPU times include the GPU work)")
        rows = list(self)
        if sort_by is not None:
            rows.sort(key=lambda r: getattr(r, sort_by), reverse=True)
        return format_table(rows, self.self_cpu_time_total, row_limit, max_name_column_width,
                            header)

    def __str__(self) -> str:
        return self.table()
