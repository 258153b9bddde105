"""Reliability loops that check an installation and an index survive hostile conditions:
damaged and forged index files, kill -9 of writers, readers racing writers, full disks,
closed terminals, a server whose index goes bad (as ``numpy.testing`` ships numpy's test
helpers). Shared by ``tests/reliability`` (small N, in CI) and ``scripts/reliability.py``
(full N: the figures of BENCHMARKS.md).

- :mod:`.harness`: bit flips, kill -9, readers against a writer.
- :mod:`.forgery`: values that keep their checksums (plausibility checks).
- :mod:`.environment`: hostile files, the file system, the terminal, the server.
"""
