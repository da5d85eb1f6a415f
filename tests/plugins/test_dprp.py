"""DPRP: shapes, determinism, the reconstruction, the privacy calibration (attacked), bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom, chi2

import dpframe
import dpframe.releases.params
from dpframe import Classes, Dataset, Domain, SeededSampler, Target, execute
from dpframe.data.relation import Relation
from dpframe.errors import DataError, DomainError, DPFrameError, ParameterError
from dpframe.privacy.accountants.zcdp import zcdp_epsilon
from dpframe.privacy.events import ComposedEvent, DiscreteGaussianEvent, EpsilonDeltaEvent
from dpframe.releases.linalg import upper_triangle

MECH = dpframe.mechanism("dprp")


def _data(n: int = 120, d: int = 5, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 2))
    x = np.clip(5 + latent @ rng.normal(size=(2, d)), 0, 10)
    y = np.where(latent[:, 0] > 0, "b", "a")
    return Dataset.from_arrays(x, y, Domain(lower=0, upper=10, labels=Classes(["a", "b"])))


# -- shapes, determinism, outputs ---------------------------------------------------------


def test_release_shapes_and_label_values():
    data = _data()
    params = MECH.params(epsilon=2.0, delta=1e-5, k1=4, k2=3, release_model=True)
    release = execute(MECH, data, params, SeededSampler(1))
    width = data.n_features + 2  # features and a one-hot block for two classes
    assert release["synthetic"].shape == (len(data), data.n_features)
    assert release["labels"].shape == (len(data),)
    assert set(release["labels"]) <= {"a", "b"}
    assert release["covariance"].shape == (width, width)
    assert release["components"].shape == (width, 3)
    assert release["projection"].shape == (len(data), 4)
    assert release["random_matrix"].shape == (width, 4)
    assert set(release.noise_scales) == {"projection", "covariance"}


def test_same_seed_same_release_and_other_seed_differs():
    data = _data()
    params = MECH.params(epsilon=2.0, delta=1e-5, k1=4)
    first = MECH.run(data, params, SeededSampler(7))
    again = MECH.run(data, params, SeededSampler(7))
    other = MECH.run(data, params, SeededSampler(8))
    assert np.array_equal(first["synthetic"], again["synthetic"])
    assert np.array_equal(first["labels"], again["labels"])
    assert not np.allclose(first["synthetic"], other["synthetic"])


def test_noise_drawn_during_the_pass_is_the_noise_drawn_after_it(monkeypatch):
    # Past one chunk the projection's noise is drawn on a thread while the pass runs, and
    # added to the rows of Z R as they are computed (by the pass once it is drawn, by the
    # noise's thread for the rows computed before); the release must be the one drawing
    # it after the pass gives, or before it (same draws, same order, each row once).
    from dpframe_dprp import mechanism

    rows = mechanism.CHUNK_ROWS + 100
    rng = np.random.default_rng(4)
    domain = Domain(lower=0, upper=10, labels=Classes(["a", "b"]))
    data = Dataset.from_arrays(rng.uniform(0, 10, (rows, 3)), rng.choice(["a", "b"], rows), domain)
    params = MECH.params(epsilon=1.0, delta=1e-5, k1=3, release_model=True)
    threads = []
    alongside = mechanism._alongside

    def watched(draw, work, *, thread):
        threads.append(thread)
        return alongside(draw, work, thread=thread)

    monkeypatch.setattr(mechanism, "_alongside", watched)
    during = MECH.run(data, params, SeededSampler(9))
    monkeypatch.setattr(
        mechanism, "_alongside", lambda draw, work, thread: tuple(reversed((work(), draw())))
    )
    after = MECH.run(data, params, SeededSampler(9))
    # drawn first: the pass adds it to each chunk's rows as it computes them
    monkeypatch.setattr(mechanism, "_alongside", lambda draw, work, thread: (draw(), work()))
    before = MECH.run(data, params, SeededSampler(9))
    assert threads == [True]
    for name in ("synthetic", "labels", "projection", "covariance", "random_matrix"):
        assert np.array_equal(during[name], after[name])
        assert np.array_equal(before[name], after[name])
    # and every chunk's rows were noised (once: the releases above agree)
    encoding = mechanism.Encoding.build(params, data.domain)
    exact, _ = mechanism._project(encoding, data, after["random_matrix"])
    for start in (0, mechanism.CHUNK_ROWS):
        chunk = slice(start, start + mechanism.CHUNK_ROWS)
        assert not np.allclose(after["projection"][chunk], exact[chunk], atol=0.1)


def test_one_worker_computes_beside_the_noise_until_it_is_drawn(monkeypatch):
    # On two cores the pass computes one chunk at a time while the noise's thread draws
    # (no core shared by two busy threads), and on both workers once it is drawn.
    import threading
    import time

    from dpframe_dprp import mechanism

    monkeypatch.setattr(mechanism, "CHUNK_ROWS", 64)
    monkeypatch.setattr(mechanism, "_PASS_WORKERS", 2)
    monkeypatch.setattr(mechanism, "_BESIDE_NOISE", 1)
    lock, active, seen = threading.Lock(), [0], {"drawing": 0, "drawn": 0}
    drawn = threading.Event()
    within_extremes = mechanism.Encoding.within_extremes  # once per chunk computed

    def watched(self, low, high, d):
        with lock:
            active[0] += 1
            phase = "drawn" if drawn.is_set() else "drawing"
            seen[phase] = max(seen[phase], active[0])
        time.sleep(0.01)  # long enough for a second worker to overlap, were it let in
        with lock:
            active[0] -= 1
        return within_extremes(self, low, high, d)

    drawn_beside = mechanism._drawn_beside

    def slow_draw(*args):
        time.sleep(0.1)  # the pass computes several chunks meanwhile
        noise = drawn_beside(*args)
        drawn.set()
        return noise

    monkeypatch.setattr(mechanism.Encoding, "within_extremes", watched)
    monkeypatch.setattr(mechanism, "_drawn_beside", slow_draw)
    rng = np.random.default_rng(5)
    rows = 64 * 40
    domain = Domain(lower=0, upper=10, labels=Classes(["a", "b"]))
    data = Dataset.from_arrays(rng.uniform(0, 10, (rows, 3)), rng.choice(["a", "b"], rows), domain)
    MECH.model(data, MECH.params(epsilon=1.0, delta=1e-5, k1=3), SeededSampler(2))
    assert seen["drawing"] == 1
    assert seen["drawn"] == 2


def test_a_callers_one_thread_limit_runs_the_model_on_its_thread(monkeypatch):
    # Under threadpool_limits(1) the pass and the noise run on the calling thread (no
    # pool, no split draw), with the bits of the default threads.
    import threading

    from dpframe_dprp import mechanism
    from threadpoolctl import threadpool_limits

    from dpframe.privacy import exact

    ran_on, split = set(), []
    within_extremes = mechanism.Encoding.within_extremes  # once per chunk computed
    worker = exact._worker

    def watched(self, low, high, d):
        ran_on.add(threading.current_thread())
        return within_extremes(self, low, high, d)

    monkeypatch.setattr(mechanism.Encoding, "within_extremes", watched)
    monkeypatch.setattr(exact, "_worker", lambda: split.append(1) or worker())
    rows = 3 * mechanism.CHUNK_ROWS + 10
    rng = np.random.default_rng(8)
    domain = Domain(lower=-1, upper=1, labels=Classes(range(3)))
    data = Dataset.from_arrays(rng.uniform(-1, 1, (rows, 20)), rng.integers(0, 3, rows), domain)
    params = MECH.params(epsilon=1.0, delta=1e-5, k1=4)
    with threadpool_limits(1):
        alone = MECH.model(data, params, SeededSampler(6))
    assert ran_on == {threading.current_thread()} and split == []
    with threadpool_limits(2):
        both = MECH.model(data, params, SeededSampler(6))
    assert len(ran_on) > 1 or mechanism.usable_cores() == 1
    for name in ("projection", "covariance", "components"):
        assert np.array_equal(getattr(alone, name), getattr(both, name))


def test_drop_labels_releases_none_and_model_only_on_request():
    release = MECH.run(
        _data(), MECH.params(epsilon=2.0, delta=1e-5, labels="drop"), SeededSampler(1)
    )
    assert set(release.arrays) == {"synthetic"}


def test_numeric_target_is_reconstructed_within_its_range():
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, (80, 3))
    data = Dataset.from_arrays(x, x.sum(axis=1), Domain(lower=0, upper=1, labels=Target(0, 3)))
    release = MECH.run(data, MECH.params(epsilon=1.0, delta=1e-5, k1=3), SeededSampler(2))
    assert release["labels"].min() >= 0 and release["labels"].max() <= 3


def test_reconstruction_recovers_the_data_when_noise_vanishes():
    # With k1 >= width and k2 = width, (V'^T R)(V'^T R)^+ = I and X' = X up to the noise,
    # whose scale falls like 1/sqrt(epsilon): at epsilon = 1e8 it is ~1e-3 per entry.
    data = _data(n=60, d=4)
    params = MECH.params(epsilon=1e8, delta=1e-5, k1=8, k2=6)
    release = MECH.run(data, params, SeededSampler(3))
    assert np.max(np.abs(release["synthetic"] - data.features)) < 0.1
    assert np.array_equal(release["labels"], data.label_values(data.labels))


# -- privacy calibration --------------------------------------------------------------------


def test_event_is_two_gaussians_and_the_failure_probability_and_meets_the_target():
    params = MECH.params(epsilon=1.5, delta=1e-5, k1=6, failure_share=0.2)
    event = MECH.plan(params, _data().domain)
    assert isinstance(event, ComposedEvent)
    gaussians = [e for e in event.events if isinstance(e, DiscreteGaussianEvent)]
    failures = [e for e in event.events if isinstance(e, EpsilonDeltaEvent)]
    assert len(gaussians) == 2 and len(failures) == 1
    assert failures[0].epsilon == 0 and failures[0].delta == pytest.approx(0.2e-5)
    assert {e.relation for e in event.events} == {Relation.REPLACE_ONE}
    # The two discrete Gaussians compose in zCDP, rho = sum 1/(2 z^2); at the target delta
    # minus delta_R it must convert to the target epsilon (conditioning argument, README).
    rho = sum(1 / (2 * e.noise_multiplier**2) for e in gaussians)
    epsilon = zcdp_epsilon(rho, 1e-5 - failures[0].delta)
    assert epsilon == pytest.approx(1.5, rel=1e-6)
    assert epsilon <= 1.5


def test_noise_scales_are_multiplier_times_declared_sensitivity():
    data = _data()
    params = MECH.params(epsilon=1.0, delta=1e-5, k1=5)
    release = MECH.run(data, params, SeededSampler(1))
    sens = MECH.sensitivity(params, data.domain)
    events = MECH.plan(params, data.domain).events
    gaussians = [e for e in events if isinstance(e, DiscreteGaussianEvent)]
    assert release.noise_scales["projection"] == pytest.approx(
        gaussians[0].noise_multiplier * sens["projection"].value
    )
    assert release.noise_scales["covariance"] == pytest.approx(
        gaussians[1].noise_multiplier * sens["covariance"].value
    )


@pytest.mark.parametrize("k1", [1, 3, 10, 40])
def test_laurent_massart_bound_fails_at_most_delta_r_over_the_mechanisms_own_r(k1):
    # The worst pair for the projection: rows B e1 and -B e1 (difference 2B; the law of
    # ||v^T R|| depends only on ||v||). delta_R = failure_share * delta = 0.05 here. For
    # 1500 seeds we take the R that run() released and count how often ||v^T R|| exceeds
    # the declared sensitivity. Under the claim the count is <= Binomial(1500, 0.05); the
    # test fails wrongly with probability < 1e-9.
    data = Dataset.from_arrays(
        np.array([[1.0, 0, 0], [0, 0.5, 0]]), None, Domain(lower=-1, upper=1)
    )
    params = MECH.params(
        epsilon=1.0, delta=0.1, failure_share=0.5, k1=k1, labels="drop", release_model=True
    )
    bound = MECH.sensitivity(params, data.domain)["projection"].value
    v = np.array([2 * math.sqrt(3), 0.0, 0.0])  # 2B, B = the standardised box's radius
    trials = 1500
    failures = sum(
        np.linalg.norm(v @ MECH.run(data, params, SeededSampler(seed))["random_matrix"]) > bound
        for seed in range(trials)
    )
    assert failures <= binom.ppf(1 - 1e-9, trials, 0.05)


def test_projection_matrix_has_variance_one_over_k1():
    # Entries of R must be iid N(0, 1/k1): sum of squares of all d*k1 entries times k1 is
    # chi2(d*k1). Two-sided check at error rate 1e-6.
    k1 = 7
    data = _data(d=6)
    release = MECH.run(
        data, MECH.params(epsilon=1.0, delta=1e-5, k1=k1, release_model=True), SeededSampler(5)
    )
    r = release["random_matrix"]
    dof = r.size
    stat = k1 * float(np.sum(r**2))
    assert chi2.ppf(5e-7, dof) < stat < chi2.ppf(1 - 5e-7, dof)


def test_covariance_sensitivity_attacked_with_neighbouring_datasets():
    # Search over neighbouring datasets (one row replaced) for the largest change of the
    # noised covariance entries; it must never exceed the declared bound, and the bound is
    # attained (orthogonal rows of norm B on the coordinate axes).
    d = 4
    domain = Domain(lower=-2, upper=2)
    params = MECH.params(
        epsilon=1.0, delta=1e-5, labels="drop", row_norm_bound=1.5, standardise=False
    )
    bound = MECH.sensitivity(params, domain.bind(d))["covariance"].value
    assert bound == pytest.approx(math.sqrt(2) * 1.5**2)
    rng = np.random.default_rng(11)
    base = rng.uniform(-1, 1, (5, d))
    candidates = [rng.uniform(-1, 1, d) * rng.uniform(0, 3) for _ in range(400)]
    candidates += [np.eye(d)[i] * s for i in range(d) for s in (1.5, -1.5, 5.0)]
    worst = 0.0
    for a in candidates[::7] + candidates[-3 * d :]:
        for b in candidates[1::9] + candidates[-3 * d :]:
            first = Dataset.from_arrays(np.vstack([base, a]), None, domain)
            second = Dataset.from_arrays(np.vstack([base, b]), None, domain)
            change = (
                MECH.query(first, params)["covariance"] - MECH.query(second, params)["covariance"]
            )
            worst = max(worst, float(np.linalg.norm(change)))
    assert worst <= bound * (1 + 1e-12)
    assert worst >= 0.999 * bound


def test_covariance_query_is_the_upper_triangle_of_the_scatter_matrix():
    data = _data()
    params = MECH.params(epsilon=1.0, delta=1e-5, labels="drop", standardise=False)
    z = data.features - data.domain.centre()
    assert np.allclose(MECH.query(data, params)["covariance"], upper_triangle(z.T @ z))


def _working_rows(x, y, centre, scale, bound, labels, weight):
    """The working rows by the paper's formula, written out: centre, scale, clip each row
    to ``bound``, append ``weight`` times the one-hot class or the scaled target."""
    u = (x - centre) / scale
    norms = np.linalg.norm(u, axis=1)
    u = u * np.where(norms > bound, bound / np.maximum(norms, 1e-300), 1.0)[:, None]
    if labels is None:
        return u
    if isinstance(labels, Classes):
        return np.hstack([u, weight * np.eye(len(labels.values))[y]])
    return np.hstack([u, (weight * (y - labels.centre) / labels.radius)[:, None]])


@pytest.mark.parametrize(
    ("lower", "upper", "labels", "extra"),
    [
        (-1.0, 1.0, Classes((0, 1, 2)), {}),  # the map is the identity: records read in place
        (-1.0, 1.0, Classes((0, 1, 2)), {"row_norm_bound": 1.9}),  # some chunks clip
        (0.0, 4.0, Classes((0, 1, 2)), {"row_norm_bound": 1.6, "label_weight": 0.7}),  # mapped
        (-1.0, 1.0, None, {"row_norm_bound": 1.5}),  # no labels: records read in place
        (0.0, 4.0, Target(0.0, 2.0), {"row_norm_bound": 1.5}),  # centred and scaled
        (0.0, 4.0, None, {"standardise": False, "row_norm_bound": 2.0, "labels": "drop"}),
    ],
)
def test_fused_pass_is_the_plain_formula_across_chunk_boundaries(
    monkeypatch, lower, upper, labels, extra
):
    # _project never assembles Z = [U | L]: it reads U in place (the records when the map
    # is the identity), sums the label block by its structure (per-class sums and counts,
    # or the target's column), and clips after the syrk (redoing a chunk with a row over
    # the bound). Z R and Z^T Z must be the plain formula's, with one worker thread or
    # several, and with the chunk kernel or numpy's path.
    from dpframe_dprp import mechanism

    monkeypatch.setattr(mechanism, "CHUNK_ROWS", 64)
    rows, d = 3 * 64 + 37, 4  # three full chunks and a short one
    rng = np.random.default_rng(11)
    x = rng.uniform(lower, upper, (rows, d))
    x[rng.random(rows) < 0.5] = (lower + upper) / 2  # chunks with and without long rows
    x[:64] = (lower + upper) / 2 + 0.1  # a first chunk with no row over any bound here
    if isinstance(labels, Classes):
        y = rng.integers(0, 3, rows)
    else:
        y = None if labels is None else rng.uniform(labels.centre - 2.0, labels.centre + 2.0, rows)
    data = Dataset.from_arrays(x, y, Domain(lower=lower, upper=upper, labels=labels))
    params = MECH.params(epsilon=1.0, delta=1e-5, k1=3, **extra)
    encoding = mechanism.Encoding.build(params, data.domain)
    z = _working_rows(
        data.features,
        data.labels,
        encoding.centre,
        encoding.scale,
        encoding.feature_bound,
        encoding.labels,
        encoding.label_weight,
    )
    assert z.shape[1] == encoding.width
    clipped = np.linalg.norm(z[:, :d], axis=1) < np.linalg.norm(
        (data.features - encoding.centre) / encoding.scale, axis=1
    ) * (1 - 1e-9)
    if "row_norm_bound" in extra:  # the bound bites in some chunks and not in others
        assert clipped.any() and not clipped[:64].any()
    r = rng.normal(size=(encoding.width, 3))
    projected, second = mechanism._project(encoding, data, r)
    np.testing.assert_allclose(projected, z @ r, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(second, z.T @ z, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(second, second.T)
    # chunks computed by several threads are summed in chunk order: the same bits
    for workers in (2, 3):
        threaded = mechanism._project(encoding, data, r, workers)
        np.testing.assert_array_equal(threaded[0], projected)
        np.testing.assert_array_equal(threaded[1], second)
    from dpframe.data import chunks

    monkeypatch.setattr(chunks, "_kernel", None)  # numpy's per-class sums: the same bits
    without = mechanism._project(encoding, data, r)
    np.testing.assert_array_equal(without[0], projected)
    np.testing.assert_array_equal(without[1], second)


def _within(encoding, u: np.ndarray) -> bool:
    """The pass's check of rows ``u`` from their extremes (NaN when one is)."""
    return encoding.within_extremes(float(u.min()), float(u.max()), u.shape[1])


@pytest.mark.parametrize("d", [1, 3, 100, 1000])
def test_the_largest_magnitude_skips_the_row_norms_only_where_no_row_is_over(d):
    # The pass checks a chunk's rows against the bound by their largest magnitude first
    # (Encoding.within_extremes) and computes the row norms only when that cannot decide:
    # it must never answer "within" for a chunk that clip() would change.
    from dpframe_dprp import mechanism

    rng = np.random.default_rng(d)
    bounds = [math.sqrt(d), np.nextafter(math.sqrt(d), 0), 1.0, 0.37 * math.sqrt(d)]
    decided = 0
    for bound in bounds:
        encoding = mechanism.Encoding(np.zeros(d), np.ones(d), bound, bound, 0.0, None)
        for largest in (bound / math.sqrt(d)) * np.array([1.0, 1 - 1e-15, 1 - 1e-12, 0.9]):
            u = rng.uniform(-largest, largest, (40, d))
            u[0] = largest  # a row at the corner: its norm is about the bound
            u[1, 0] = -largest
            within = _within(encoding, u)
            decided += within
            if within:
                assert encoding.clip(u.copy(), u.copy()) is None
            else:  # undecided near the bound (a few ulp of rounding): rows compared one by one
                assert largest > 0.9 * bound / math.sqrt(d)
    assert decided >= len(bounds)  # the cheap test decides away from the bound
    encoding = mechanism.Encoding(np.zeros(d), np.ones(d), 1.0, 1.0, 0.0, None)
    assert not _within(encoding, np.full((2, d), np.nan))
    assert not _within(encoding, np.ones((2, d)))  # the corner of the bound's box
    over = np.zeros((3, d))
    over[1, 0] = np.nextafter(1.0, 2.0)  # one row one ulp over
    assert not _within(encoding, over)
    assert encoding.clip(over.copy(), over.copy()) is not None


def test_rows_over_the_bound_are_clipped_in_the_model_with_or_without_the_shortcut(monkeypatch):
    # The same model whether the pass skips the row norms of chunks proved within the
    # bound or computes them for every chunk (chunks within the bound and chunks over it).
    from dpframe_dprp import mechanism

    monkeypatch.setattr(mechanism, "CHUNK_ROWS", 64)
    rng = np.random.default_rng(12)
    x = rng.uniform(-1, 1, (64 * 5 + 9, 6))
    x[64:128] = np.sign(x[64:128])  # a chunk of corners: at the bound, not proved within
    x[200:260] *= 0.2
    data = Dataset.from_arrays(
        x, rng.integers(0, 3, len(x)), Domain(-1, 1, labels=Classes([0, 1, 2]))
    )
    for bound in (None, 1.9):  # the default bound (the box's corners) and one that bites
        params = MECH.params(epsilon=1.0, delta=1e-5, k1=3, row_norm_bound=bound)
        fast = MECH.model(data, params, SeededSampler(3))
        with monkeypatch.context() as patch:
            patch.setattr(mechanism.Encoding, "within_extremes", lambda *args: False)
            slow = MECH.model(data, params, SeededSampler(3))
        for name in ("projection", "covariance", "components"):
            assert np.array_equal(getattr(fast, name), getattr(slow, name))


def test_model_has_the_same_bits_with_one_blas_thread_or_the_default():
    # The eigendecomposition runs on one BLAS thread whatever the caller's default (for a
    # 105 x 105 matrix LAPACK's results with two threads differ by an ulp from one's).
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(13)
    x = rng.uniform(-1, 1, (600, 100))
    data = Dataset.from_arrays(x, rng.integers(0, 5, 600), Domain(-1, 1, labels=Classes(range(5))))
    params = MECH.params(epsilon=1.0, delta=1e-5, k1=10)
    models = []
    for threads in (None, 1, 2):
        with threadpool_limits(threads):
            models.append(MECH.model(data, params, SeededSampler(5)))
    for model in models[1:]:
        for name in ("projection", "covariance", "components"):
            assert np.array_equal(getattr(model, name), getattr(models[0], name))


# -- bad input --------------------------------------------------------------------------------


def _one_sentence(error: DPFrameError) -> None:
    text = str(error)
    assert "\n" not in text and text.endswith(".")


@pytest.mark.parametrize(
    "values",
    [
        {"epsilon": 0.0, "delta": 1e-5},
        {"epsilon": -1.0, "delta": 1e-5},
        {"epsilon": 1.0, "delta": 0.0},
        {"epsilon": 1.0, "delta": 1e-5, "k1": 0},
        {"epsilon": 1.0, "delta": 1e-5, "k2": 0},
        {"epsilon": 1.0, "delta": 1e-5, "projection_share": 1.0},
        {"epsilon": 1.0, "delta": 1e-5, "labels": "noisy"},
        # their squares overflowed: OverflowError at 1e308 (fuzzing, stop 41)
        {"epsilon": 1.0, "delta": 1e-5, "label_weight": 1e308},
        {"epsilon": 1.0, "delta": 1e-5, "row_norm_bound": 1e300},
    ],
)
def test_bad_parameters_are_one_sentence(values):
    with pytest.raises(ParameterError) as info:
        MECH.params(**values)
    _one_sentence(info.value)


def test_k2_larger_than_the_working_width_is_refused_in_plan():
    with pytest.raises(ParameterError, match="k2 = 8 exceeds the working width 7") as info:
        MECH.plan(MECH.params(epsilon=1.0, delta=1e-5, k1=10, k2=8), _data().domain)
    _one_sentence(info.value)


def test_row_norm_bound_must_leave_room_for_the_label_block():
    with pytest.raises(ParameterError, match="label_weight") as info:
        MECH.plan(MECH.params(epsilon=1.0, delta=1e-5, row_norm_bound=1.0), _data().domain)
    _one_sentence(info.value)


def test_a_label_weight_that_swamps_the_features_is_named():
    # beside a label block of norm 1e50 the features' squares are lost to rounding: the
    # sentence named an empty domain instead (fuzzing, stop 41)
    params = MECH.params(epsilon=1.0, delta=1e-5, label_weight=1e50)
    with pytest.raises(ParameterError, match=r"label_weight \(1e\+50\) is so large") as info:
        MECH.plan(params, _data().domain)
    _one_sentence(info.value)


def test_add_remove_domain_is_refused():
    domain = Domain(lower=0, upper=1, relation="add_remove").bind(3)
    with pytest.raises(ParameterError, match="replace_one") as info:
        MECH.plan(MECH.params(epsilon=1.0, delta=1e-5), domain)
    _one_sentence(info.value)


def test_unbounded_domain_is_refused():
    with pytest.raises(DomainError) as info:
        MECH.plan(MECH.params(epsilon=1.0, delta=1e-5), Domain().bind(3))
    _one_sentence(info.value)


def test_missing_labels_are_one_sentence():
    data = Dataset.from_arrays(
        np.ones((5, 2)), None, Domain(lower=0, upper=2, labels=Classes([0, 1]))
    )
    with pytest.raises(DataError) as info:
        MECH.run(data, MECH.params(epsilon=1.0, delta=1e-5, k1=2), SeededSampler(0))
    _one_sentence(info.value)


def test_registered_and_described():
    described = MECH.describe()
    names = {p["name"] for p in described["parameters"]}
    assert {"k1", "k2", "projection_share", "failure_share", "row_norm_bound"} <= names
    assert described["relations"] == ["replace_one"]


def test_default_k2_is_half_of_k1_and_capped_by_the_width():
    data = _data(d=3)  # width 5: three features and two label columns
    for k1, expected in ((1, 1), (5, 2), (10, 5), (40, 5)):
        params = MECH.params(epsilon=1.0, delta=1e-5, k1=k1, release_model=True)
        assert MECH.run(data, params, SeededSampler(0))["components"].shape == (5, expected)


def test_public_centre_moves_the_working_space_not_the_privacy_bound():
    # A public centre inside the box: features are scaled by their reach from it, so the
    # working rows still lie in [-1, 1]^d and B (hence both sensitivities) is unchanged.
    data = _data()
    centre = np.array([2.0, 5.0, 7.0, 5.0, 1.0])
    params = MECH.params(epsilon=1.0, delta=1e-5, labels="drop", centre=centre)
    default = MECH.params(epsilon=1.0, delta=1e-5, labels="drop")
    assert MECH.sensitivity(params, data.domain) == MECH.sensitivity(default, data.domain)
    z = np.sqrt(MECH.query(data, params)["covariance"][[0, 5, 9, 12, 14]])  # diagonal
    assert np.all(z <= np.sqrt(len(data)) + 1e-9)
    reach = np.maximum(10 - centre, centre)
    expected = ((data.features - centre) / reach) ** 2
    assert np.allclose(z**2, expected.sum(axis=0))


@pytest.mark.parametrize(
    "centre", [np.array([1.0, 2.0]), np.array([11.0, 5, 5, 5, 5]), np.array([np.nan, 5, 5, 5, 5])]
)
def test_bad_centre_is_one_sentence(centre):
    with pytest.raises(ParameterError) as info:
        MECH.plan(MECH.params(epsilon=1.0, delta=1e-5, centre=centre), _data().domain)
    _one_sentence(info.value)


# -- the ILPD reproduction -------------------------------------------------------------------


def test_ilpd_loader_applies_only_public_record_by_record_maps(datasets_dir):
    from dpframe_reproduce.dprp import FEATURES, UPPER, load_ilpd

    x, y, domain = load_ilpd(datasets_dir)
    # Shape and class counts from the dataset's README (583 rows; 416 / 167).
    assert x.shape == (583, 10)
    assert np.bincount(y)[1:].tolist() == [416, 167]
    # The 4 missing A/G ratios (0-based rows 209, 241, 253, 312) get the declared centre.
    assert np.all(x[[209, 241, 253, 312], FEATURES.index("Alb_GI")] == UPPER[-1] / 2)
    assert set(np.unique(x[:, FEATURES.index("sex")])) == {0.0, 1.0}
    data = Dataset.from_arrays(x, y, domain)
    assert data.clip_report.total == 0  # the declared bounds cover every record


@pytest.mark.slow
def test_dprp_reproduction_writes_its_report(datasets_dir, tmp_path):
    from dpframe_reproduce.dprp import EPSILONS, K1S, run

    text = run(trials=2, out_dir=tmp_path, datasets_dir=datasets_dir).read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "±" in line]
    assert len(rows) == len(EPSILONS) * len(K1S)
    assert "Real-data baseline" in text


def test_the_memory_check_counts_every_label_column(monkeypatch):
    # R is width x k1, and the width has a column per class: with 1,000 classes and 3
    # features the check counted 4 columns, so this k1 passed it and then failed allocating
    monkeypatch.setattr(dpframe.releases.params, "_physical_memory", lambda: 8 * 10**6)
    domain = Domain(lower=0.0, upper=1.0, labels=Classes(tuple(range(1000)))).bind(3)
    with pytest.raises(ParameterError, match="more than this machine's") as info:
        MECH.plan(MECH.params(epsilon=1.0, delta=1e-5, k1=2000), domain)
    _one_sentence(info.value)
