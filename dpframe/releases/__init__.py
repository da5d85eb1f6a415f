"""Releases: mechanisms run on data and charged to a ledger.

:mod:`~dpframe.releases.mechanism` (the Mechanism interface and :func:`execute`),
:mod:`~.params` (validated parameters), :mod:`~.hookspecs`, :mod:`~.plugins` and
:mod:`~.builtins` (discovery and registration), :mod:`~.release` (the DP output and its
metadata), :mod:`~.session` (a budgeted sequence of releases on one dataset),
:mod:`~.chain` (multi-step releases from a spec), :mod:`~.synthesis` and :mod:`~.linalg`
(post-processing shared by mechanisms).
"""
