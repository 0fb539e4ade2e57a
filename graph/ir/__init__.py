"""The IR: typed single-assignment graphs (`core`), the sub-graphs nodes own (`regions`, fused
bodies in `fused`), symbolic sizes, printing, serialisation and the reference interpreter.
Imports nothing else of the graph layer."""
