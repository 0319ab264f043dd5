"""Inference autoscaling families and their replay: pre-scaling to a quantile of the peak over the lead
(``lookahead``), the predictive metric beside the live one (``predictive``), today's cron pre-scaling, and
what an inference plan takes from the 7-day forecast.
"""
