"""RON-Gauss: releases, events, sensitivities under attack (and the paper's Lemma 4
counterexample), utility on real data, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from plugin_testkit import one_sentence, uniform_rows

import dpframe
from dpframe import Dataset, Domain, SeededSampler, Target, execute
from dpframe.data.relation import Relation
from dpframe.errors import DataError, DomainError, ParameterError
from dpframe.privacy.accountants.pure import PureAccountant
from dpframe.privacy.events import ComposedEvent, DiscreteLaplaceEvent

RON = dpframe.mechanism("ron_gauss")
CUBE = Domain(lower=-1.0, upper=1.0)


def kappa(p: int) -> float:
    return 1.0 if p == 1 else math.sqrt(p * (p + 3) / 2)


def test_projected_release_shapes():
    data = Dataset.from_arrays(uniform_rows(1, 300, 8), domain=CUBE)
    release = execute(RON, data, RON.params(epsilon=1.0, dimension=3), SeededSampler(2))
    assert release["synthetic"].shape == (300, 3) and release["synthetic"].dtype == np.float64
    w = release["projection"]
    assert w.shape == (8, 3) and np.allclose(w.T @ w, np.eye(3), atol=1e-10)
    assert release["mean"].shape == (8,) and release["covariance"].shape == (3, 3)
    assert np.linalg.eigvalsh(release["covariance"]).min() > -1e-12
    assert set(release.noise_scales) == {"mean", "covariance"}
    assert "labels" not in release.arrays


def test_original_space_is_the_mean_plus_the_span_of_w():
    data = Dataset.from_arrays(uniform_rows(3, 200, 6), domain=CUBE)
    params = RON.params(epsilon=1.0, dimension=2, output_space="original", n_synthetic=50)
    release = execute(RON, data, params, SeededSampler(4))
    x, w, mean = release["synthetic"], release["projection"], release["mean"]
    assert x.shape == (50, 6)
    residual = (x - mean) - (x - mean) @ w @ w.T  # component outside span(W)
    assert np.abs(residual).max() < 1e-10


def test_supervised_release_has_labels_in_range():
    rows = uniform_rows(5, 300, 6)
    labels = 3 * rows[:, 0] + 1
    domain = Domain(lower=-1.0, upper=1.0, labels=Target(-2.0, 4.0))
    data = Dataset.from_arrays(rows, labels, domain)
    release = execute(
        RON, data, RON.params(epsilon=2.0, dimension=3, supervised=True), SeededSampler(6)
    )
    assert release["synthetic"].shape == (300, 3)
    assert release["labels"].shape == (300,)
    assert release["labels"].min() >= -2.0 and release["labels"].max() <= 4.0
    assert release["covariance"].shape == (4, 4)


def test_same_seed_same_release():
    data = Dataset.from_arrays(uniform_rows(7, 100, 5), domain=CUBE)
    params = RON.params(epsilon=1.0, dimension=2)
    a, b, c = (execute(RON, data, params, SeededSampler(s)) for s in (8, 8, 9))
    for name in a.arrays:
        assert np.array_equal(a[name], b[name])
    assert not np.allclose(a["synthetic"], c["synthetic"])


def test_plan_composes_two_laplace_events():
    domain = Domain(feature_names=tuple("abcdef"), records=100)  # RON-Gauss needs no bounds
    event = RON.plan(RON.params(epsilon=2.0, dimension=3, mean_share=0.25), domain)
    assert event == ComposedEvent(
        (
            DiscreteLaplaceEvent(1 / 0.5, relation=Relation.REPLACE_ONE),
            DiscreteLaplaceEvent(1 / 1.5, relation=Relation.REPLACE_ONE),
        )
    )
    assert PureAccountant().epsilon(event) == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize(("noise", "delta"), [("laplace", 0.0), ("gaussian", 1e-6)])
def test_mean_bound_is_attained(neighbours, noise, delta):
    m, n = 5, 4
    params = RON.params(epsilon=1.0, delta=delta, dimension=2, noise=noise)
    base = (uniform_rows(10, n - 1, m), None)
    ones = np.ones(m)
    change, declared = neighbours(RON, params, CUBE, base, (ones, None), (-ones, None))
    expected = (2 * math.sqrt(m) if noise == "laplace" else 2.0) / n
    assert declared["mean"].value == pytest.approx(expected)
    assert change["mean"] == pytest.approx(expected)


def test_paper_lemma4_constant_is_exceeded_while_ours_holds(neighbours):
    """Neighbouring datasets whose projected rows differ in v against w (unit vectors in
    R^10). The paper's Lemma 4 claims an L1 change of 2 sqrt(p)/n for the p x p matrix."""
    p, m, n = 10, 12, 6
    k = [[1.0, -1.0], [-1.0, -1.0]]  # eigenvalues +- sqrt(2)
    signs = -np.kron(k, np.ones((p // 2, p // 2)))  # a sign matrix with eigenvalues +- p/sqrt(2)
    values, vectors = np.linalg.eigh(signs)
    v, w = vectors[:, -1], vectors[:, 0]  # the extreme eigenvectors
    params = RON.params(epsilon=1.0, dimension=p)
    base = (uniform_rows(11, n - 1, m), None)
    # query() projects with the first p identity columns and centres at 0 (its documented
    # stand-ins), so the record x = (v, 0, 0) projects to exactly v.
    x, y = np.concatenate([v, [0.0, 0.0]]), np.concatenate([w, [0.0, 0.0]])
    change, declared = neighbours(RON, params, CUBE, base, (x, None), (y, None))
    delta = np.outer(v, v) - np.outer(w, w)
    full_l1 = np.abs(delta).sum()
    assert full_l1 == pytest.approx(values[-1] - values[0])  # = sqrt(2) p = 14.14
    paper = 2 * math.sqrt(p) / n
    assert full_l1 / n > 2.2 * paper  # the paper's own (full-matrix) layout
    assert change["covariance"] > paper  # even our upper-triangle layout exceeds it
    assert change["covariance"] == pytest.approx((p + 1) / math.sqrt(2) / n)
    assert change["covariance"] <= declared["covariance"].value
    assert declared["covariance"].value == pytest.approx(kappa(p) / n)


@pytest.mark.parametrize(("m", "p", "closeness"), [(3, 2, 0.999), (4, 3, 0.93)])
def test_covariance_sensitivity_survives_attack(search, m, p, closeness):
    base = (uniform_rows(12, 4, m), None)
    params = RON.params(epsilon=1.0, dimension=p)
    found, declared = search(RON, params, CUBE, base, random_pairs=60)
    for stage in ("mean", "covariance"):
        assert found[stage] <= declared[stage].value * (1 + 1e-9)
    # kappa_2 = sqrt(5) is attained exactly; kappa_3 = 3 against ~2.87 found offline
    assert found["covariance"] >= closeness * declared["covariance"].value
    assert found["mean"] >= 0.999 * declared["mean"].value


def test_supervised_sensitivity_survives_attack(search):
    m, p = 3, 2
    domain = Domain(lower=-1.0, upper=1.0, labels=Target(-1.0, 1.0))
    base = (uniform_rows(13, 4, m), SeededSampler(14).uniform(-1, 1, 4))
    params = RON.params(epsilon=1.0, dimension=p, supervised=True)
    found, declared = search(
        RON, params, domain, base, labels=(-1.0, 0.0, 1.0), continuous_label=(-1.0, 1.0)
    )
    value = declared["covariance"].value
    assert found["covariance"] <= value * (1 + 1e-9)
    # ours: kappa_2 + a sqrt(2) + a^2 + 2/4 = 5.15 (a = 1); notes: 3 + 2 sqrt(2) + 1 = 6.83
    assert value * 5 == pytest.approx(math.sqrt(5) + math.sqrt(2) + 1 + 0.5)
    assert found["covariance"] >= 0.85 * value


def _projected(features, centre, mean, w):
    """RON-Gauss preprocessing, written out independently of the plugin."""

    def unit(a):
        norms = np.linalg.norm(a, axis=1, keepdims=True)
        return a / np.where(norms == 0, 1, norms)

    return unit(unit(features - centre) - mean) @ w


def test_synthetic_second_moment_approaches_real_at_large_epsilon(ctg):
    features, _, names = ctg
    domain = Domain(lower=features.min(0).tolist(), upper=features.max(0).tolist())
    data = Dataset.from_arrays(features, domain=domain, feature_names=names)
    # in the declared units, so the projection below is the mechanism's
    params = RON.params(epsilon=1e6, dimension=5, n_synthetic=200_000, units="raw")
    release = execute(RON, data, params, SeededSampler(15))
    z = _projected(features, data.domain.centre(), release["mean"], release["projection"])
    real = z.T @ z / len(z)
    synthetic = release["synthetic"].T @ release["synthetic"] / 200_000
    # Sampling error of a 5x5 second moment from 2e5 Gaussian draws is ~0.3% per entry;
    # 2% of the Frobenius norm fails with negligible probability (fixed seed).
    assert np.linalg.norm(synthetic - real) < 0.02 * np.linalg.norm(real)
    assert np.linalg.norm(release["covariance"] - real) < 1e-4 * np.linalg.norm(real)


def test_supervised_model_approaches_real_at_large_epsilon(liver):
    features, drinks = liver
    domain = Domain(
        lower=features.min(0).tolist(),
        upper=features.max(0).tolist(),
        labels=Target(0.0, 20.0),
    )
    data = Dataset.from_arrays(features, drinks, domain)
    params = RON.params(epsilon=1e6, dimension=3, supervised=True, n_synthetic=100_000, units="raw")
    release = execute(RON, data, params, SeededSampler(16))
    z = _projected(features, data.domain.centre(), release["mean"], release["projection"])
    augmented = np.column_stack([z, drinks - 10.0])
    real = augmented.T @ augmented / len(z)
    assert np.linalg.norm(release["covariance"] - real) < 1e-4 * np.linalg.norm(real)
    synthetic = release["synthetic"]
    block = synthetic.T @ synthetic / len(synthetic)
    assert np.linalg.norm(block - real[:3, :3]) < 0.03 * np.linalg.norm(real[:3, :3])


def test_bad_parameters_fail_with_one_sentence():
    domain = Domain(lower=-1.0, upper=1.0, feature_names=tuple("abc"), records=10)
    with pytest.raises(ParameterError) as exc:
        RON.plan(RON.params(epsilon=1.0, dimension=4), domain)
    assert "exceeds the number of features (3)" in one_sentence(exc)
    with pytest.raises(DomainError) as exc:
        RON.plan(RON.params(epsilon=1.0, dimension=2, supervised=True), domain)
    assert "bounded numeric label" in one_sentence(exc)
    for bad in ({"epsilon": 0.0}, {"epsilon": -2.0}, {"mean_share": 1.0}, {"noise": "cauchy"}):
        with pytest.raises(ParameterError) as exc:
            RON.params(**{"epsilon": 1.0, "dimension": 2, **bad})
        one_sentence(exc)
    unlabelled = Dataset.from_arrays(
        uniform_rows(17, 20, 3), None, Domain(lower=-1.0, upper=1.0, labels=Target(0.0, 1.0))
    )
    with pytest.raises(DataError) as exc:
        execute(RON, unlabelled, RON.params(epsilon=1.0, dimension=2, supervised=True))
    assert "needs labels" in one_sentence(exc)


def test_a_record_next_to_the_dp_mean_keeps_its_direction():
    """The re-normalisation of ``u - mu~`` is taken of the elementwise difference: for a
    record 1e-9 from the DP mean, the expanded ``||u||^2 - 2 u.mu~ + ||mu~||^2`` cancels
    to noise (its rounding is 1e-16 against a true value of 1e-18), the direct form keeps
    the direction to about 1e-6 of the exact one (docs/privacy-promise.md, item 6)."""
    from fractions import Fraction

    from dpframe_rongauss.mechanism import _Preprocess

    rng = np.random.default_rng(5)
    rows = rng.uniform(-1, 1, size=(64, 6))
    data = Dataset.from_arrays(rows, domain=CUBE)
    pre = _Preprocess(data, supervised=False)
    w, _ = np.linalg.qr(rng.standard_normal((6, 3)))
    u0 = rows[0] / np.linalg.norm(rows[0])
    offset = rng.standard_normal(6)
    mean = u0 + 1e-9 * offset / np.linalg.norm(offset)
    z = pre.projected(rows.copy(), None, mean, w)[0]
    # exact direction of W^T (u0 - mean) from the float rows, in rationals
    x = [Fraction(v) for v in rows[0]]
    norm = Fraction(math.sqrt(float(sum(v * v for v in x))))
    d = [v / norm - Fraction(m) for v, m in zip(x, mean, strict=True)]
    size = math.sqrt(float(sum(v * v for v in d)))
    exact = (
        np.array([float(sum(dv * Fraction(w[i, j]) for i, dv in enumerate(d))) for j in range(3)])
        / size
    )
    assert np.linalg.norm(z - exact) < 1e-5


def test_the_second_pass_reuses_the_first_pass_row_norms(monkeypatch):
    """An in-memory Dataset's second pass takes its rows' ``1 / ||x - c||`` from the first
    pass (kept per chunk) and computes no row norm of ``x`` again: the same bits as
    recomputing them, over several chunks on two threads, with a row at the centre and a
    domain centred off the origin."""
    from dpframe_rongauss import mechanism as ron
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(7)
    rows = rng.uniform(0.0, 2.0, size=(3 * ron.CHUNK_ROWS + 5, 20))
    rows[4] = 1.0  # the centre: v = 0, 1 / ||v|| taken as 0
    data = Dataset.from_arrays(rows, domain=Domain(lower=0.0, upper=2.0))
    w, _ = np.linalg.qr(rng.standard_normal((20, 4)))
    with threadpool_limits(2):
        kept = ron._Preprocess(data, supervised=False)
        mean = kept.unit_mean(data) + 0.01
        assert kept.inverses is not None and len(kept.inverses) == 4
        recomputed = ron._Preprocess(data, supervised=False).second_moment(data, mean, w)

        def no_norms(rows: np.ndarray) -> None:
            raise AssertionError("the second pass recomputed the row norms")

        monkeypatch.setattr(kept, "_centred", no_norms)
        assert np.array_equal(kept.second_moment(data, mean, w), recomputed)


def test_a_record_at_the_dp_mean_projects_to_zero():
    """``u = mu~`` exactly: ``z = 0`` (no division by a zero norm), the other rows
    ``W^T (u - mu~) / ||u - mu~||``."""
    from dpframe_rongauss.mechanism import _Preprocess

    rng = np.random.default_rng(8)
    rows = rng.uniform(-1, 1, size=(50, 5))
    data = Dataset.from_arrays(rows, domain=CUBE)
    pre = _Preprocess(data, supervised=False)
    v, inverse = pre._centred(rows)
    mean = v[3] * inverse[3]  # u_3, bit for bit
    w, _ = np.linalg.qr(rng.standard_normal((5, 2)))
    z = pre.projected(rows, None, mean, w)
    assert np.array_equal(z[3], np.zeros(2))
    d = np.delete(v * inverse[:, None] - mean, 3, axis=0)
    expected = d @ w / np.linalg.norm(d, axis=1)[:, None]
    assert np.allclose(np.delete(z, 3, axis=0), expected, rtol=0, atol=1e-12)
