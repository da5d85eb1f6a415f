"""dpframe_dpcda: DP-CDA, class-centric noisy mixtures, with a sound privacy analysis.

See README.md for the algorithm, the privacy analysis and where we differ from the paper.
"""
