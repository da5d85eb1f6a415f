"""dpframe_mvg: the MVG mechanism (matrix-variate Gaussian noise with directional noise).

Chanyaswad, Dytso, Poor, Mittal, CCS 2018. See README.md in this folder for the algorithm,
every sensitivity with its proof, the calibrations and the max-PNR derivation.
"""

from dpframe_mvg.mechanism import MVGMechanism, MVGParams

__all__ = ["MVGMechanism", "MVGParams"]
