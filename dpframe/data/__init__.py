"""Data and domain: what a release reads.

:mod:`~dpframe.data.domain` (the public bounds, classes and column kinds), :mod:`~.dataset`
(the records, checked against the domain), :mod:`~.loaders` and :mod:`~.sources` (files,
streams and Dask), :mod:`~.cluster` (Dask passes that end), :mod:`~.stats` (additive
statistics reduced chunk by chunk), :mod:`~.units` (the public rescaling of the box),
:mod:`~.relation` (the neighbouring relation). The small public datasets bundled with
dpframe live here too (``ctg.csv``, ``ctg-demo.toml``; see README.md in this folder).
"""
