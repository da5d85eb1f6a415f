"""dpframe_gmm: a class-conditional Gaussian mixture with DP per-class moments (the GMM
extension of PCA-Gauss and RON-Gauss). See README.md for the privacy analysis."""
