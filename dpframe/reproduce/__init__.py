"""Reproductions of the papers' experiments.

Each module ``dpframe.reproduce.<name>`` exposes
``run(trials: int, out_dir: Path, datasets_dir: Path) -> Path``, which runs the experiment
and writes ``<out_dir>/<name>.md`` (the report under ``docs/reproductions/``). They need
the ``eval`` extra (scikit-learn) and the shared datasets; run one with
``python -m dpframe.reproduce.<name>``.
"""
