"""scikit-learn idioms on the dpframe plugins: synthesizers with ``fit(X, y)`` and
``sample(n)``, and a DP PCA transformer with ``fit``/``transform``.

::

    from dpframe.sklearn import GMMSynthesizer

    synth = GMMSynthesizer(
        domain="ctg.domain.toml", epsilon=2.0, delta=1e-6, params={"noise": "gaussian"},
        ledger="privacy.ledger", budget="ctg", cap=(4.0, 1e-6),
    )
    X_syn, y_syn = synth.fit(X, y).sample()

Each ``fit`` is one release of the named mechanism, through the same plugin as the CLI and
:class:`~dpframe.releases.session.Session`, charged to budget ``budget`` of ``ledger`` (created
with ``cap`` and ``accountant`` on the first charge) before the data are read, and
refused (:class:`~dpframe.errors.BudgetExceededError`, nothing charged) when it does not
fit. Refitting is a new release and is charged again: privacy is spent by ``fit``, not by
``sample`` or ``transform``, which post-process the release. ``ledger=None`` runs without
a ledger and warns (:class:`UnrecordedReleaseWarning`): the release is private, but
nothing keeps count.

The ``domain`` (a :class:`~dpframe.data.domain.Domain` or the path of a domain file) is
required: bounds taken from ``X`` would not be private. ``X`` may be an array or a pandas
DataFrame, whose columns are matched to the domain's features by name (columns it does not
name are left out; a categorical feature holds its category labels). As in scikit-learn,
``feature_names_in_`` and ``n_features_in_`` record the columns ``fit`` saw, and
``transform`` wants the same columns (a DataFrame's by name, in the same order). ``y`` gives
a labelled domain's labels (a DataFrame ``X`` may hold them in the domain's label column
instead); without them the fit is unlabelled, and :class:`GMMSynthesizer` and
:class:`DPCDASynthesizer`, which need them, refuse. ``sample`` and ``transform`` answer in
kind.

``fit`` is randomised: two fits of the same data give different releases unless ``seed``
is set (which makes the run reproducible and NOT secure; the ledger flags it). The
estimator checks of scikit-learn that assume a deterministic or unconstrained estimator
cannot apply; ``tests/core/test_sklearn.py`` runs the others and lists why each excluded
one does not (:data:`NOT_APPLICABLE`).

scikit-learn is imported when this module is (the ``eval`` and ``dev`` extras); the rest
of dpframe never imports it.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import check_array
from sklearn.utils.validation import check_is_fitted, validate_data

from dpframe.data.dataset import (
    Dataset,
    check_real,
    column_position,
    encode_categories,
    is_dataframe,
)
from dpframe.data.domain import Domain
from dpframe.errors import DataError, ParameterError
from dpframe.releases.release import Release


class UnrecordedReleaseWarning(UserWarning):
    """A release was made without a ledger: nothing keeps count of the privacy spent."""


NOT_APPLICABLE = {
    "check_dtype_object": "the check relabels y with a class the domain does not declare; "
    "the class list is public and fixed before any data are seen, so an undeclared class "
    "is refused (DataError naming the row), never added from the data",
    "check_fit2d_1sample": "DP-CDA only: a synthetic record averages l records of one "
    "class, so a class needs at least l records (a clear DataError otherwise)",
}
"""scikit-learn estimator checks that cannot apply to a private estimator bound to a
public domain, and why (the test suite runs all the others, with a seed: unseeded fits
are tagged ``non_deterministic``, under which scikit-learn skips the checks that compare
two fits)."""


class _Release(BaseEstimator):
    """One release of ``mechanism_name`` per ``fit``, charged to ``ledger``'s budget."""

    mechanism_name: str = ""
    _needs_labels: bool = False  # a class-conditional mechanism

    def __init__(
        self,
        *,
        domain: Domain | str | os.PathLike[str] | None = None,
        epsilon: float = 1.0,
        delta: float = 0.0,
        params: dict[str, Any] | None = None,
        ledger: Any = None,
        budget: str | None = None,
        cap: Any = None,
        accountant: str | None = None,
        seed: int | None = None,
    ) -> None:
        self.domain = domain
        self.epsilon = epsilon
        self.delta = delta
        self.params = params
        self.ledger = ledger
        self.budget = budget
        self.cap = cap
        self.accountant = accountant
        self.seed = seed

    # -- fitting -------------------------------------------------------------------------

    def _domain(self) -> Domain:
        if self.domain is None:
            raise ParameterError(
                f"{type(self).__name__} needs domain= (a Domain or a domain file): bounds "
                "taken from the data would not be private."
            )
        if isinstance(self.domain, Domain):
            return self.domain
        return Domain.from_toml(Path(self.domain))

    def _dataset(self, X: Any, y: Any) -> Dataset:
        domain = self._domain()
        if domain.labels is None:
            y = None  # an unlabelled domain: y is ignored, as by unsupervised estimators
        self._frame = is_dataframe(X)
        # scikit-learn records the columns seen (feature_names_in_, n_features_in_) and
        # checks arrays of numbers (shape, sparse, complex, NaN); the Dataset then checks
        # the data against the domain (a DataFrame's columns by name, categories as their
        # labels) and clips them.
        columns = _columns(X) if self._frame else None
        if self._frame or domain.categories:
            validate_data(self, X, reset=True, skip_check_array=True)
        else:
            X = validate_data(self, X, reset=True, dtype=np.float64)
        label = None
        if y is not None and columns is not None:
            label = str(getattr(y, "name", None) or "label")
            while label in columns:  # never replace a feature
                label = f"_{label}"
            X = X.assign(**{label: np.asarray(y)})
        elif y is None and domain.labels is not None and _absent(domain.labels.column, columns):
            if self._needs_labels:
                raise DataError(f"{type(self).__name__} needs labels: give them as y.")
            domain = _without_labels(domain)  # none given: fit without them
        if columns is None:
            dataset = Dataset.from_arrays(X, y, domain)
            self._columns = np.arange(dataset.n_features)
            return dataset
        dataset = Dataset.from_dataframe(X, domain, label=label)
        # where each of the model's features is among the columns seen
        self._columns = np.array([columns.index(n) for n in dataset.domain.feature_names])
        return dataset

    def _mechanism_params(self) -> dict[str, Any]:
        return dict(self.params or {})

    def _release(self, dataset: Dataset) -> Release:
        from dpframe.privacy.samplers import make_sampler
        from dpframe.releases.mechanism import execute
        from dpframe.releases.plugins import registry
        from dpframe.releases.session import Session

        values = self._mechanism_params()
        if self.ledger is None:
            warnings.warn(
                f"{type(self).__name__}.fit without a ledger: the release is private but "
                "nothing keeps count of the budget spent; pass ledger= and budget=.",
                UnrecordedReleaseWarning,
                stacklevel=3,
            )
            mechanism = registry().mechanism(self.mechanism_name)()
            params = mechanism.params(epsilon=self.epsilon, delta=self.delta, **values)
            return execute(mechanism, dataset, params, make_sampler(self.seed))
        if not self.budget:
            raise ParameterError("give budget= (the label of the ledger's budget) with ledger=.")
        with Session(
            dataset,
            self.ledger,
            self.budget,
            cap=self.cap,
            accountant=self.accountant,
            seed=self.seed,
        ) as session:
            return session.release(
                self.mechanism_name, epsilon=self.epsilon, delta=self.delta, **values
            )

    def _fit(self, X: Any, y: Any = None) -> Dataset:
        dataset = self._dataset(X, y)
        self.release_ = self._release(dataset)
        return dataset

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.seed is None  # a seeded fit is reproducible
        return tags


class _Synthesizer(_Release):
    """``fit(X, y)`` releases synthetic data; ``sample(n)`` post-processes it."""

    def fit(self, X: Any, y: Any = None) -> _Synthesizer:
        """One DP release of synthetic records from ``X`` (and ``y``); charged to the
        ledger's budget before the data are read."""
        self._fit(X, y)
        return self

    def sample(self, n: int | None = None, random_state: int | None = None) -> Any:
        """The released synthetic records (``(X, y)`` when labelled): all of them, or ``n``
        drawn uniformly from them (with replacement when ``n`` exceeds their number).
        Post-processing: no budget. ``random_state`` seeds the draw (a dpframe sampler:
        secure without it). For more distinct records, fit with a larger ``n_synthetic``
        in ``params`` (drawn from the DP model at no extra cost)."""
        check_is_fitted(self, "release_")
        release = self.release_
        if "synthetic" not in release.arrays:
            raise ParameterError("this release has no synthetic records.")
        total = release["synthetic"].shape[0]
        if n is None:
            rows = np.arange(total)
        else:
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
                raise ParameterError(f"n must be a whole number >= 1, got {n!r}.")
            from dpframe.privacy.samplers import make_sampler

            sampler = make_sampler(random_state)
            rows = (
                sampler.integers(0, total, int(n)) if n > total else sampler.subset(total, int(n))
            )
        has_labels = "labels" in release.arrays
        if getattr(self, "_frame", False):
            frame = release.to_pandas().iloc[rows].reset_index(drop=True)
            if not has_labels:
                return frame
            label = frame.columns[-1]
            return frame.drop(columns=[label]), frame[label]
        x = release["synthetic"][rows]
        return (x, release["labels"][rows]) if has_labels else x


class GMMSynthesizer(_Synthesizer):
    """Class-conditional Gaussian mixture (``gmm``)."""

    mechanism_name = "gmm"
    _needs_labels = True


class RONGaussSynthesizer(_Synthesizer):
    """RON-Gauss (``ron_gauss``); ``params`` may give ``dimension`` and ``mean_share``
    (otherwise the public rule chooses them: ``release_.info["by_rule"]``). Mapped back to
    the feature axes (``output_space = "original"``) unless ``params`` says otherwise."""

    mechanism_name = "ron_gauss"

    def _mechanism_params(self) -> dict[str, Any]:
        return {"output_space": "original", **(self.params or {})}


class PCAGaussSynthesizer(_Synthesizer):
    """PCA-Gauss (``pca_gauss``): Algorithm 1 (records in principal coordinates; ``params``
    may give ``dimension``, otherwise the public rule chooses it) or, with ``supervised``
    and ``projection`` in ``params``, Algorithm 2."""

    mechanism_name = "pca_gauss"


class DPRPSynthesizer(_Synthesizer):
    """DPRP (``dprp``, Gaussian noise: ``delta > 0``)."""

    mechanism_name = "dprp"


class DPCDASynthesizer(_Synthesizer):
    """DP-CDA (``dpcda``, Gaussian noise: ``delta > 0``)."""

    mechanism_name = "dpcda"
    _needs_labels = True


class DPPCA(TransformerMixin, _Release):
    """DP principal components (``lap_pca``): ``fit`` releases the top
    ``n_components`` directions, ``transform`` projects records on them (post-processing).
    With ``n_components=None`` (the default) the public rule of n, m and ε chooses how many
    (``release_.info["by_rule"]``).

    ``components_`` is ``n_components x n_features`` (scikit-learn's layout), its columns
    the domain's features in the domain's order (a DataFrame may hold them in another
    order, among other columns: ``feature_names_in_``), and ``mean_`` the domain's public
    centre the records are centred at (never the private mean). With
    ``params={"units": "rescaled"}`` the directions are those of the records rescaled by
    the public bounds, and ``transform`` rescales first.
    """

    mechanism_name = "lap_pca"

    def __init__(
        self,
        n_components: int | None = None,
        *,
        domain: Domain | str | os.PathLike[str] | None = None,
        epsilon: float = 1.0,
        delta: float = 0.0,
        params: dict[str, Any] | None = None,
        ledger: Any = None,
        budget: str | None = None,
        cap: Any = None,
        accountant: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(
            domain=domain,
            epsilon=epsilon,
            delta=delta,
            params=params,
            ledger=ledger,
            budget=budget,
            cap=cap,
            accountant=accountant,
            seed=seed,
        )
        self.n_components = n_components

    def _mechanism_params(self) -> dict[str, Any]:
        chosen = {} if self.n_components is None else {"dimension": self.n_components}
        return {**chosen, **(self.params or {})}

    def fit(self, X: Any, y: Any = None) -> DPPCA:
        """One DP release of the principal directions of ``X`` (``y`` is ignored)."""
        from dpframe.data.units import UnitMap

        dataset = self._fit(X, None)
        release = self.release_
        self.components_ = release["components"].T.copy()
        self.explained_variance_ = release["eigenvalues"].copy()
        self.mean_ = dataset.domain.centre()
        self._fitted_domain = dataset.domain
        rescaled = str(release.info.get("units", "")).startswith("rescaled")
        self._units = UnitMap.of(dataset.domain) if rescaled else None
        return self

    def transform(self, X: Any) -> Any:
        """``(X - mean_) @ components_.T`` (after the public rescaling, if used). ``X`` has
        the columns ``fit`` saw (by name, in the same order, for a DataFrame); the model's
        features are taken from them as ``fit`` took them."""
        check_is_fitted(self, "components_")
        x = self._features(X)
        if self._units is not None:
            return self._units.features(x) @ self.components_.T
        return (x - self.mean_) @ self.components_.T

    def _features(self, X: Any) -> np.ndarray:
        """The model's features of ``X``, in the domain's order (categories coded)."""
        domain = self._fitted_domain
        frame = is_dataframe(X)
        if not (frame or domain.categories):
            return validate_data(self, X, reset=False, dtype=np.float64)[:, self._columns]
        if frame:
            _columns(X)  # distinct names, which scikit-learn then checks are fit's
        validate_data(self, X, reset=False, skip_check_array=True)
        if frame:
            block = X.iloc[:, self._columns]
            for name, dtype in zip(domain.feature_names, block.dtypes, strict=True):
                check_real(dtype, name)  # dates would pass as nanoseconds
        else:
            block = np.asarray(X)[:, self._columns]
        if domain.categories:
            block = encode_categories(block, domain, domain.feature_names)
        return check_array(block, dtype=np.float64, input_name="X", estimator=self)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        check_is_fitted(self, "components_")
        return np.asarray([f"dppca{j}" for j in range(self.components_.shape[0])], dtype=object)


def _columns(frame: Any) -> list[str]:
    """A DataFrame's column names as text; one sentence if two are the same (both
    ``feature_names_in_`` and matching by name need distinct names)."""
    columns = [str(c) for c in frame.columns]
    if len(set(columns)) < len(columns):
        for name in columns:
            column_position(name, columns, where="X")
    return columns


def _absent(column: str | int | None, columns: list[str] | None) -> bool:
    """Whether the label column ``column`` is not among a DataFrame's ``columns`` (``None``
    for an array); an index is left to the Dataset to resolve."""
    return columns is None or column is None or (isinstance(column, str) and column not in columns)


def _without_labels(domain: Domain) -> Domain:
    import attrs

    return attrs.evolve(domain, labels=None)
