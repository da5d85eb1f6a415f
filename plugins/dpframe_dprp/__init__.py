"""dpframe_dprp: DPRP, DP data release by random projection and reconstruction.

See README.md for the algorithm, the privacy analysis and where we differ from the paper.
"""
