"""What GPUs cost and how they are bought: the price book per GPU model and purchase option (on-demand,
spot, reserved), the purchase book's limits, and whole GPUs from continuous levels.
"""
