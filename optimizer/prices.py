"""Price book: USD per GPU-hour per GPU model, for on-demand, reserved and spot.

Defaults (configurable under ``prices:`` in ``capplan.yaml``):

* On-demand: AWS EC2 On-Demand list prices, us-east-1, Linux, per instance
  divided by its GPU count — p3dn.24xlarge $31.212/h for 8x V100-32GB
  (3.90), p4d.24xlarge $32.773/h for 8x A100-40GB (4.10), p4de.24xlarge
  $40.966/h for 8x A100-80GB (5.12), p5.48xlarge $98.32/h for 8x H100-80GB
  (12.29), g5.xlarge $1.006/h for 1x A10G-24GB (1.01). Source: the AWS EC2
  On-Demand pricing page (aws.amazon.com/ec2/pricing/on-demand/), 2024 list.
* Reserved: 0.60 x on-demand, the order of a 1-year no-upfront Compute
  Savings Plan / reserved-instance discount on the same page family
  (aws.amazon.com/savingsplans/compute-pricing/).
* Spot: 0.40 x on-demand — the seeds' rule of thumb "spot saves about 60 %".

These are list prices, not the user's contract: set your own in the config.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

RESERVED_FACTOR = 0.60
SPOT_FACTOR = 0.40

_ON_DEMAND = {
    "V100-32GB": 3.90,
    "A100-40GB": 4.10,
    "A100-80GB": 5.12,
    "H100-80GB": 12.29,
    "A10G-24GB": 1.01,
    "default": 4.10,
}


class GpuPrice(BaseModel):
    """USD per GPU-hour for one GPU model."""

    on_demand: float = Field(gt=0, description="on-demand price, USD per GPU-hour")
    reserved: float = Field(gt=0, description="reserved (committed) price, USD per GPU-hour")
    spot: float = Field(gt=0, description="spot price, USD per GPU-hour")


def default_price_book() -> dict[str, GpuPrice]:
    """The cited defaults above, keyed by GPU model name."""
    return {k: GpuPrice(on_demand=v, reserved=round(v * RESERVED_FACTOR, 4), spot=round(v * SPOT_FACTOR, 4))
            for k, v in _ON_DEMAND.items()}


def price_for(book: dict[str, GpuPrice], gpu_model: str) -> tuple[GpuPrice, str | None]:
    """Look up a GPU model; unknown models get the ``default`` entry and a note saying so."""
    if gpu_model in book:
        return book[gpu_model], None
    return book.get("default", default_price_book()["default"]), (
        f"prices: no entry for GPU model {gpu_model!r}; the 'default' price was used")
