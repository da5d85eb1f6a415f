"""dpframe_pcagauss: PCA-Gauss, a DP Gaussian model in principal coordinates (Chanyaswad,
Liu, Mittal 2017, Algorithms 1 and 2). See README.md for the privacy analysis."""
