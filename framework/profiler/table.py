"""PyTorch's profiler summary table: one row per event or average, columns chosen by what was
recorded (memory, input shapes, stacks)."""
from __future__ import annotations


def format_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def format_bytes(n: int) -> str:
    for unit, size in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} b"


def _percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.2f}%" if whole else "0.00%"


def format_table(rows: list, self_total_us: float, row_limit: int, name_width: int,
                 header: str | None) -> str:
    memory = any(r.cpu_memory_usage for r in rows)
    shapes = any(r.input_shapes for r in rows)
    stacks = any(getattr(r, "stack", None) for r in rows)
    if row_limit is not None and row_limit > 0:
        rows = rows[:row_limit]
    names = [r.key if len(r.key) <= name_width else r.key[:name_width - 3] + "..." for r in rows]
    columns = [("Name", names)]
    columns += [
        ("Self CPU %", [_percent(r.self_cpu_time_total, self_total_us) for r in rows]),
        ("Self CPU", [format_time(r.self_cpu_time_total) for r in rows]),
        ("CPU total %", [_percent(r.cpu_time_total, self_total_us) for r in rows]),
        ("CPU total", [format_time(r.cpu_time_total) for r in rows]),
        ("CPU time avg", [format_time(r.cpu_time_total / max(r.count, 1)) for r in rows])]
    if memory:
        columns += [("CPU Mem", [format_bytes(r.cpu_memory_usage) for r in rows]),
                    ("Self CPU Mem", [format_bytes(r.self_cpu_memory_usage) for r in rows])]
    columns.append(("# of Calls", [str(r.count) for r in rows]))
    if shapes:
        columns.append(("Input Shapes", [str(r.input_shapes or "") for r in rows]))
    if stacks:
        columns.append(("Source Location", [(r.stack or ("",))[0] for r in rows]))
    widths = [max([len(title)] + [len(c) for c in cells]) for title, cells in columns]
    rule = "  ".join("-" * w for w in widths)

    def line(cells) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]).rstrip()
    out = [header] if header else []
    out += [rule, line([title for title, _ in columns]), rule]
    out += [line([cells[i] for _, cells in columns]) for i in range(len(rows))]
    out += [rule, f"Self CPU time total: {format_time(self_total_us)}", ""]
    return "\n".join(out)
