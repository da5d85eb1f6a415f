"""Applications built on the library: the command line (:mod:`~dpframe.apps.cli`), the
utility evaluation (:mod:`~.evaluate`) and its figures (:mod:`~.plots`), and the demo
(:mod:`~.demo`). The papers' reproductions are experiment code and live outside the
library, in the ``dpframe_reproduce`` package (``experiments/`` in the repository)."""
