"""The fleet plan: one plan for every GPU model, team and slice of a heterogeneous fleet. Series that share
capacity (a Kueue cohort, one Volcano cluster) are pooled across teams, so the fleet buys the peak of their sum
rather than the sum of their peaks; each series' demand is placed only on the GPU models it may use (its list or
memory floor, converted by relative speed); and fractional demand shares GPUs, on MIG slices of the models that
have MIG (:mod:`.mig`) or by time-slicing/MPS on the others (:mod:`.sharing`), with the stranded GPUs that a
placement leaves reported.

The plan: :mod:`.problem` (the fleet, its demand in GPUs of each series' own model and the conversion by
relative speed), :mod:`.limit` (the sizing programme per model and purchase option, and the perfect-foresight
limit), :mod:`.causal` (sizes from what was known before each decision), :mod:`.replay` (which model serves
which series each hour, and what is left unmet), :mod:`.compare` (recommended against alone, pooled and the
limit: fleet regret)."""
