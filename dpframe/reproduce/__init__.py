"""Reproductions of the papers' experiments, one module per method.

Each module ``dpframe.reproduce.<name>`` exposes
``run(trials: int, out_dir: Path, datasets_dir: Path) -> Path``, which runs the experiment
on the shared datasets and writes ``<out_dir>/<name>.md`` (normally
``docs/reproductions/<name>.md``), returning its path. They need the ``eval`` extra
(scikit-learn) and the shared datasets; heavy dependencies are imported inside functions.
"""
