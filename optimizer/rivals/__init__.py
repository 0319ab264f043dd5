"""What every recommendation is compared with: the rules of thumb (baseline), the peer policies (reactive,
naive conformal, empirical), the calibrated rule the search must beat (incumbent), the judge of the tuning
window, and the perfect-foresight limit.
"""
