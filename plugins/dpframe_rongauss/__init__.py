"""dpframe_rongauss: RON-Gauss, random orthonormal projection plus a DP Gaussian model
(Chanyaswad, Liu, Mittal, PoPETs 2019). See README.md for the privacy analysis."""
