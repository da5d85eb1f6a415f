"""Privacy mathematics: what a release costs and how its noise is drawn.

:mod:`~dpframe.privacy.events` (what a release spends), :mod:`~.accountants` (how spending
composes), :mod:`~.calibration` (noise scales from a target), :mod:`~.sensitivities` (the
shared sensitivities), :mod:`~.samplers` (every random draw), :mod:`~.exact` and
:mod:`~.selection` (exact discrete noise and the exact exponential mechanism),
:mod:`~.noise` (releases on a grid), :mod:`~.budget` (caps and tolerant arithmetic).
Nothing here reads a dataset.
"""
