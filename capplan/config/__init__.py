"""Settings: the pydantic model of ``capplan.yaml`` and its sections, reading YAML within bounds, the
``--quick`` preset, and ``docs/configuration.md`` generated from the models.
"""
