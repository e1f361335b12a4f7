"""Hop's benchmark harness: throughput, latency and scale, side by side.

``python -m bench`` builds the C load generator (bench/loadgen), runs every
scenario in interleaved rounds on this machine, prints a table of medians
and writes ``results.json`` and ``results.png`` (see ``python -m bench -h``).
"""
