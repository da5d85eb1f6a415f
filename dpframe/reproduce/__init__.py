"""Reproductions of the papers' experiments, one module per method.

Convention: each module exposes ``run(trials: int, out_dir: Path, datasets_dir: Path) ->
Path``, which runs the experiments on the shared datasets and writes
``out_dir / "<name>.md"`` (normally ``docs/reproductions/<name>.md``), returning its path.
Heavy dependencies (scikit-learn, pandas) are imported inside the functions.
"""
