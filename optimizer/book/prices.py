"""Price book: USD per GPU-hour per GPU model, for on-demand, reserved and spot.

Defaults (configurable under ``prices:`` in ``capplan.yaml``):

* On-demand: AWS EC2 On-Demand list prices, us-east-1, Linux, per instance
  divided by its GPU count — p3dn.24xlarge $31.212/h for 8x V100-32GB
  (3.90), p4d.24xlarge $32.773/h for 8x A100-40GB (4.10), p4de.24xlarge
  $40.966/h for 8x A100-80GB (5.12), p5.48xlarge $98.32/h for 8x H100-80GB
  (12.29), g5.xlarge $1.006/h for 1x A10G-24GB (1.01). Source: the AWS EC2
  On-Demand pricing page (aws.amazon.com/ec2/pricing/on-demand/), 2024 list.
  The models of the GPU catalogue (:mod:`optimizer.book.gpus`) added later, AWS us-east-1 on-demand per
  instance divided by its GPUs, from ``skypilot-org/skypilot-catalog : catalogs/v8/aws/vms.csv``
  (commit 00148f2a, built from AWS pricing data): p5en.48xlarge $63.296/h for 8x H200-141GB (7.91),
  g6e.12xlarge $10.49264/h for 4x L40S (2.62), g6.xlarge $0.8048/h for 1x L4 (0.80); and g4dn.xlarge
  $0.526/h for 1x T4 (0.53; AWS EC2 On-Demand pricing page, not in that catalog extract: re-check). The
  H200 figure is a 2025 catalog price, after AWS's 2025 cut of P4/P5 prices that the 2024 H100 list figure
  above predates: set your own prices before comparing the two.
  The catalogue names the A10G ``A10G``; the book keeps its ``A10G-24GB`` key and :func:`price_for` reads
  either (:data:`ALIASES`).
* Reserved: 0.60 x on-demand, the order of a 1-year no-upfront Compute
  Savings Plan / reserved-instance discount on the same page family
  (aws.amazon.com/savingsplans/compute-pricing/).
* Spot: 0.40 x on-demand — the rule of thumb "spot saves about 60 %".
* What can be bought (:mod:`optimizer.book.purchase`), per GPU model:

  - spot availability, ``spot_cap_gpus`` / ``spot_cap_share``: no cap by default, because the cap
    is what the user's account is granted, not a list figure; a plan that buys spot without one
    says so in its notes. GPU spot capacity is scarce: the AWS Spot Instance Advisor
    (aws.amazon.com/ec2/spot/instance-advisor/) buckets each instance type's monthly frequency of
    interruption into <5 %, 5-10 %, 10-15 %, 15-20 % and >20 %, and GPU types move between those buckets
    with demand; AWS's default Spot Instance quotas for its GPU families ("All P4, P3 and P2", "All P5",
    "All G and VT Spot Instance Requests") are 0 vCPUs until the account asks for more (AWS EC2 User Guide,
    "Spot Instance quotas", docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-spot-limits.html), and Google
    Cloud sells Spot VMs from excess capacity whose availability varies. Any bounded default would be a
    guess at one account's grant and would move every figure of a default plan, so the book keeps no cap
    and states it instead: the first lines under the plan table, the dashboard's Fleet page and
    ``report.json``'s ``summary.assumptions`` (:mod:`capplan.report.assumptions`) say the plan assumes no
    cap, how much of it is spot, and which setting bounds it;
  - ``reserved_min_term_days``: 7 days, the replay's weekly reservation cadence and a term AWS sells
    as EC2 Capacity Blocks for ML (1-14 days in 1-day steps, then 7-day steps to 182 days; AWS EC2
    User Guide, "Find and purchase Capacity Blocks",
    docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html); a 1-year
    reserved instance or savings plan is 365;
  - ``interruption_rate`` (per spot GPU-hour) and ``recovery_s`` (GPU-seconds lost per
    interruption): the plan's (``plan.interruption_rate`` 0.01, ``plan.recovery_s`` 1,800 s) unless
    set. 0.01 per GPU-hour is pessimistic next to the Advisor's worst bucket (>20 % a month,
    about 0.0003 per instance-hour): it stands for the capacity reclaims of scarce GPU types.

These are list prices, not the user's contract: set your own in the config.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

RESERVED_FACTOR = 0.60
SPOT_FACTOR = 0.40

_ON_DEMAND = {
    "V100-32GB": 3.90,
    "A100-40GB": 4.10,
    "A100-80GB": 5.12,
    "H100-80GB": 12.29,
    "A10G-24GB": 1.01,
    "default": 4.10,
    "H200-141GB": 7.91,
    "L40S": 2.62,
    "L4": 0.80,
    "T4": 0.53,
}

# other names of a book key (the GPU catalogue's name -> the book's key), read by :func:`price_for`
ALIASES = {"A10G": "A10G-24GB"}


MAX_PRICE = 10_000.0
"""Highest price accepted, USD per GPU-hour: about 1,000 times the dearest GPU-hour sold (H100 on demand,
about 12 USD), so a typo or an overflowing value (``1e308``) is refused at the price key, not met as an
infinite cost in a series' replay."""
MAX_TERM_DAYS = 3 * 366
"""Longest reservation term accepted, days: the longest commitment the clouds sell (3 years)."""


class GpuPrice(BaseModel):
    """USD per GPU-hour for one GPU model, and what of each layer a cloud sells (:mod:`optimizer.book.purchase`).
    Unknown keys are refused (a misspelt ``spot_cap_share`` would otherwise leave spot uncapped, silently)."""

    model_config = ConfigDict(extra="forbid")

    on_demand: float = Field(gt=0, le=MAX_PRICE, description="on-demand price, USD per GPU-hour")
    reserved: float = Field(gt=0, le=MAX_PRICE, description="reserved (committed) price, USD per GPU-hour")
    spot: float = Field(gt=0, le=MAX_PRICE, description="spot price, USD per GPU-hour")
    spot_cap_gpus: float | None = Field(default=None, ge=0, description="most spot GPUs the cloud sells at once; "
                                        "None = no cap")
    spot_cap_share: float | None = Field(default=None, ge=0, le=1, description="most spot GPUs as a share (0-1) of "
                                         "the GPUs bought in a step; None = no cap")
    reserved_min_term_days: float = Field(default=7.0, gt=0, le=MAX_TERM_DAYS, description="a reservation's "
                                          "(capacity block's) minimum term, days")
    interruption_rate: float | None = Field(default=None, ge=0, description="spot interruptions per spot GPU-hour; "
                                            "None = plan.interruption_rate")
    recovery_s: int | None = Field(default=None, ge=0, description="GPU-seconds lost per interruption; "
                                   "None = plan.recovery_s")


def default_price_book() -> dict[str, GpuPrice]:
    """The cited defaults above, keyed by GPU model name."""
    return {k: GpuPrice(on_demand=v, reserved=round(v * RESERVED_FACTOR, 4), spot=round(v * SPOT_FACTOR, 4))
            for k, v in _ON_DEMAND.items()}


def price_for(book: dict[str, GpuPrice], gpu_model: str) -> tuple[GpuPrice, str | None]:
    """Look up a GPU model (or its alias, :data:`ALIASES`); unknown models get the ``default`` entry and a note
    saying so."""
    if gpu_model in book:
        return book[gpu_model], None
    if ALIASES.get(gpu_model) in book:
        return book[ALIASES[gpu_model]], None
    return book.get("default", default_price_book()["default"]), (
        f"prices: no entry for GPU model {gpu_model!r}; the 'default' price was used")


def built_in_note(configured: dict[str, GpuPrice], gpu_model: str) -> str | None:
    """A note when the configuration prices some GPU models (``configured``: the config's ``prices:``) but not
    ``gpu_model``, whose built-in entry (:func:`default_price_book`: no spot cap) is used: a model name spelt
    differently (``V100`` for ``V100-32GB``) would otherwise leave its cap unapplied, silently. None when the
    configuration prices no model or prices this one, or when no built-in entry has it (:func:`price_for` notes
    the ``default`` price then)."""
    if not configured or gpu_model in configured or gpu_model not in default_price_book():
        return None
    return (f"prices: the configuration prices {', '.join(sorted(configured))} but not this series' GPU model "
            f"{gpu_model!r}; the built-in {gpu_model!r} entry (no spot cap) was used. Add prices.{gpu_model} "
            "to price it")
