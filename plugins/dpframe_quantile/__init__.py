"""dpframe_quantile: a DP quantile (median by default) by the exact exponential mechanism.

The reference example of a selection mechanism: its score sensitivity, its event and its
sampler are the ones third-party selection mechanisms (AIM, MST) use. See README.md.
"""
