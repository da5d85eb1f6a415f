"""dpframe_lappca: Lap-PCA, principal components from a DP covariance (Chanyaswad, Liu,
Mittal 2017, Section VII). See README.md for the privacy analysis."""
