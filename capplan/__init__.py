"""capplan: forecasting and capacity planning for GPU clusters.

The application package: configuration, CLI, sources, store and the pipeline
stages that wire :mod:`forecasting` and :mod:`optimizer` together.
"""

__version__ = "0.1.0"
