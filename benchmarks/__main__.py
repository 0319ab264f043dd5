"""``python -m benchmarks NAME [options]``: see :mod:`benchmarks.runner`."""

from benchmarks.runner import main

main()
