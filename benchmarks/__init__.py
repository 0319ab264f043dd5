"""capplan's benchmarks: one runner, ``python -m benchmarks NAME [options]`` (see README.md here).

Each benchmark is a module of this package with ``main(argv)``; the runner
(:mod:`benchmarks.runner`) runs it, prints its output and records it with the
commit, date, load average and command in ``benchmarks/RESULTS.md``. Shared
options, data loading and the plan's stages run a few at a time live in
:mod:`benchmarks.common`. Modules used only by
benchmarks (hindsight bounds, saved forecast frames) live here too, not in the
library packages.
"""
