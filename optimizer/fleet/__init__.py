"""The fleet plan: one plan for every GPU model, team and slice of a heterogeneous fleet. Series that share
capacity (a Kueue cohort, one Volcano cluster) are pooled across teams, so the fleet buys the peak of their sum
rather than the sum of their peaks; each series' demand is placed only on the GPU models it may use (its list or
memory floor, converted by relative speed); and fractional demand shares GPUs, on MIG slices of the models that
have MIG (:mod:`.mig`) or by time-slicing/MPS on the others (:mod:`.sharing`), with the stranded GPUs that a
placement leaves reported."""
