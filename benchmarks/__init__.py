"""dualflow's benchmark harness: standard workloads timed side by side with other frameworks.

Run `python benchmarks/run.py --help`; see benchmarks/README.md for the methods and results.
"""
