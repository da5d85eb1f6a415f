"""Parameters MST and AIM share: the public bins, the synthetic count, ``in_domain`` and a
δ > 0."""

from __future__ import annotations

import attrs
from dpframe import PrivacyParams, param
from dpframe.data.units import in_domain_param
from dpframe.errors import ParameterError
from dpframe.releases.synthesis import n_synthetic_param


@attrs.frozen(kw_only=True)
class MarginalParams(PrivacyParams):
    bins: int = param(8, help="equal-width public bins per numeric column", constraint=">= 2")
    n_synthetic: int | None = n_synthetic_param()
    in_domain: bool = in_domain_param()

    def __attrs_post_init__(self) -> None:
        if not 0 < self.delta < 1:
            raise ParameterError("MST and AIM are (ε, δ)-DP through zCDP; give 0 < delta < 1.")
        if isinstance(self.bins, bool) or not isinstance(self.bins, int) or self.bins < 2:
            raise ParameterError(f"bins must be an integer >= 2, got {self.bins!r}.")
