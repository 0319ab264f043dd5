"""The rules that size a training pool's layers (reserved, day level, hourly top-up) and their replay inputs:
the newsvendor critical ratios, the calibrated day level and top-up, the empirical quantile levels, the
committed (reserved) layer, intermittent pools, and the fresh forecast of the next hour.
"""
