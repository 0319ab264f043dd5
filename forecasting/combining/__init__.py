"""Combining the models' forecasts of a series: lead bands and buckets, exponentially weighted loss weights,
online conformal calibration per lead bucket, the blend across bucket boundaries, and the assembly of it all.
"""
