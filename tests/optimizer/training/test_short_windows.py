"""A window shorter than the lead (a series of an hour or a little more, split in thirds) has no rise that
far: the rise offset is 0 there, never a numpy broadcast error in the search."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.training.empirical import rise_offset


@pytest.mark.parametrize("n", [1, 2, 4, 11])
def test_rise_offset_of_a_window_shorter_than_the_lead(n):
    v = np.arange(n, dtype=float)
    assert rise_offset(v, np.arange(n), lead=12, window=100).tolist() == [0.0] * n


def test_rise_offset_unchanged_from_the_lead_on():
    v = np.arange(40, dtype=float)
    out = rise_offset(v, np.array([12, 39]), lead=12, window=100)
    assert out.tolist() == [12.0, 12.0]  # a rise of one a step: 12 over the 12-step lead
