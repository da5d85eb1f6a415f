"""Sensitivity lemmas for additive statistics of bounded records, proved once.

Mechanisms map each (clipped) record ``x`` to a vector ``v = g(x)`` by a public,
record-by-record map ``g`` (centring at a public point, normalisation, a public
projection) and release noisy sums over records. The only thing the proofs below need is
a public :class:`Region` containing every possible ``v``:

    ``||v||_2 <= R``,  ``|v_j| <= r_j`` (optional per-coordinate half-widths),
    ``||v||_1 <= L``   (``L <= min(sqrt(d) R, sum_j r_j)``).

Two kinds of change of one record are bounded: ``replace`` (``v -> w``, the replace-one
relation) and ``add`` (``v`` enters or leaves the sum; used for a record changing
partition, and for add/remove). Every function returns the bound on the change of the
*sum* over records; divide by the public record count for means.

Vector sum ``S = sum_i v_i``
    replace: ``S - S' = v - w``: L1 ``<= ||v||_1 + ||w||_1 <= 2L`` (and
    ``<= sum_j |v_j - w_j| <= 2 sum_j r_j``, already in ``L``); L2 ``<= 2R``.
    add: ``+-v``: L1 ``<= L``, L2 ``<= R``.

Second moment ``S = sum_i v_i v_i^T``, released as its upper triangle ``U`` (diagonal
included; PRIVACY-NOTES rule 3) under Laplace noise, and as ``svec`` (upper triangle with
off-diagonal entries times sqrt(2), so ``||svec A||_2 = ||A||_F``) under Gaussian noise.

    replace, L1.  ``D = vv^T - ww^T``. Two bounds, we take the smaller:

    * box: ``|D_jj| <= r_j^2`` (both squares lie in ``[0, r_j^2]``) and
      ``|D_jk| <= 2 r_j r_k``, so ``sum_{j<=k} |D_jk| <= (sum_j r_j)^2``.
    * spectral (derived here): let ``s_jk = sign(D_jk)`` and let ``T`` be the symmetric
      matrix with ``T_jj = s_jj`` and ``T_jk = T_kj = s_jk / 2``. Then
      ``sum_{j<=k} |D_jk| = <T, D> = v^T T v - w^T T w
      <= R^2 (max(lmax(T), 0) + max(-lmin(T), 0))``. When both terms are positive their
      sum is ``lmax - lmin <= sqrt(2 (lmax^2 + lmin^2)) <= sqrt(2) ||T||_F``, otherwise it
      is at most ``max |l| <= ||T||_F``. With ``||T||_F^2 = d + d(d-1)/4 = d(d+3)/4``:
      ``sum_{j<=k} |D_jk| <= kappa_d R^2``, ``kappa_d = sqrt(d (d+3) / 2)``. For
      ``d = 1``, ``|v^2 - w^2| <= R^2`` (``kappa_1 = 1``).

    ``kappa_d`` is below ``d + 1`` (the bound ``sum_{j<=k} |v_j v_k| + |w_j w_k| =
    (||v||_1^2 + ||v||_2^2)/2 + (...)`` gives ``(d+1) R^2``) for every ``d``, and within
    a few percent of what a numerical search attains (d = 2: exact; d = 10: 7.81 found
    against 8.06); so for unit vectors the RON-Gauss bound ``(p+1)/n`` of the notes
    tightens to ``kappa_p / n``, and the Lap-PCA bound ``M^2 a^2 / N`` for ``[-a, a]^M``
    (the box bound) to ``kappa_M M a^2 / N ~ M^2 a^2 / (sqrt(2) N)``.

    add, L1.  ``sum_{j<=k} |v_j v_k| = (||v||_1^2 + ||v||_2^2) / 2 <= (L^2 + R^2) / 2``.

    replace, L2.  ``||vv^T - ww^T||_F^2 = ||v||^4 + ||w||^4 - 2 (v.w)^2 <= 2 R^4``, so
    ``sqrt(2) R^2``.   add, L2.  ``||vv^T||_F = ||v||^2 <= R^2``.

Top-k eigenvalues of the second moment (PCA-Gauss), replace (derived; Weyl and
interlacing). Let ``A`` be the second moment of D and ``A' = A - vv^T + ww^T`` that of D',
and ``B = A + ww^T``. Adding a PSD matrix raises no eigenvalue (Weyl), so
``a_i = lambda_i(B) - lambda_i(A) >= 0`` with ``sum_i a_i = tr(ww^T) <= R^2``, and
``b_i = lambda_i(B) - lambda_i(A') >= 0`` with ``sum_i b_i = ||v||^2 <= R^2``. The change
is ``delta_i = a_i - b_i``, and ``|delta_i| <= max(a_i, b_i) <= R^2``. Hence over the top k:
L1 ``<= sum_i (a_i + b_i) <= 2 R^2`` and ``<= k R^2``: ``min(k, 2) R^2``;
L2 ``sum_i delta_i^2 <= sum_i (a_i^2 + b_i^2) <= (sum a_i)^2 + (sum b_i)^2 <= 2 R^4`` and
``<= k R^4``: ``min(sqrt(k), sqrt(2)) R^2``.

Labelled second moment (supervised synthesis): ``z = (u, y)`` with ``u`` in a region
(bounds ``R, L``) and a label ``|y| <= a``, released as the upper triangle (L1) or svec
(L2) of ``sum_i z_i z_i^T``, replace (derived). Its upper triangle splits into the
feature block, the cross column ``u y`` and the corner ``y^2``:

    L1 ``<= kappa-bound(u-region) + max_{0<=t<=s<=a} [L (s + t) + s^2 - t^2]``, since the
    cross column changes by ``sum_k |u_k y - w_k y'| <= L (|y| + |y'|)`` and the corner by
    ``|y^2 - y'^2|``. The maximum is at ``s = a``, ``t = min(a, L/2)``: ``2 a L`` when
    ``a <= L/2``, else ``a L + a^2 + L^2/4``. Both are below the ``2 a L + a^2`` of adding
    the two worst cases separately (PRIVACY-NOTES: ``(p+1) + 2 a sqrt(p) + a^2``).
    L2 ``<= sqrt(2) (R^2 + a^2)`` (the second-moment bound for ``||z|| <= sqrt(R^2+a^2)``).

Floating-point error of the computed statistic (issue 15). The lemmas bound the change of
the *exact* statistic ``f``; a mechanism computes ``f^`` in double precision, and the
rounding, blocking, chunking and threading of that computation may differ between two
neighbouring datasets. With a public per-coordinate bound ``|f^ - f| <= e``,
``|f^(D) - f^(D')| <= |f(D) - f(D')| + 2e`` per coordinate, so the statistic's sensitivity
is ``Delta + 2 e d`` (L1) or ``Delta + 2 e sqrt(d)`` (L2) over ``d`` coordinates; the grid
(:func:`dpframe.privacy.noise.grid_for`) adds it next to its rounding term. ``e`` comes from
the standard forward error bounds (Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., Lemma 3.1, Lemma 3.3 and eq. (3.5)), with ``u = 2^-53`` and
``gamma_m = m u / (1 - m u)``:

* a sum of ``n`` terms, in *any* order and grouping (pairwise, BLAS blocks, chunks,
  threads, with or without fused multiply-adds): ``|fl(sum a_i) - sum a_i| <= gamma_{n-1}
  sum |a_i|``; an inner product ``|fl(x^T y) - x^T y| <= gamma_n |x|^T |y|``, so each entry
  of ``X^T X`` or ``S X`` (a 0/1 selection) is covered the same way;
* each term ``a_i`` is itself computed from one record by a public map whose absolute error
  is at most ``gamma_k m``, ``m`` bounding the exact ``|a_i|`` and ``k`` the map's longest
  chain of roundings (centring and rescaling are a few elementwise operations; a row norm
  or a row's inner product with a public column is one chain of ``d`` terms; a
  normalisation ``v / ||v||`` with ``v`` computed elementwise has relative error
  ``gamma_{d+3}`` per coordinate, so it stays in this form);
* together (``gamma_a + gamma_b + gamma_a gamma_b <= gamma_{a+b}``, Lemma 3.3):
  ``e <= gamma_{n + k} n m`` for the sum, and ``gamma_{n + k + 1} m`` for the mean
  ``fl(sum / n)``.

The terms' count ``n`` must be public (replace-one, or a public subset size); ``m`` and
``k`` come from the region and the map's shape. Everything else a mechanism does with the
private data before the grid is a deterministic function of one record (elementwise IEEE
operations are correctly rounded, whatever the position or vectorisation), hence part of
the public record-by-record map the lemmas already allow; docs/privacy-promise.md lists
each built-in's statistics and bounds.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Literal

import attrs
import numpy as np

from dpframe.data.domain import Domain
from dpframe.data.relation import Relation
from dpframe.errors import DomainError, ParameterError

Norm = Literal["l1", "l2"]
Change = Literal["replace", "add"]


def _as_widths(value: object) -> tuple[float, ...] | None:
    if value is None:
        return None
    return tuple(float(v) for v in np.asarray(value, dtype=np.float64).ravel())


@attrs.frozen
class Region:
    """A public bound on every transformed record ``v`` (see the module docstring).

    ``radius`` bounds ``||v||_2``, ``half_widths`` (optional) bound ``|v_j|`` and ``l1``
    bounds ``||v||_1``; the constructor tightens ``radius`` and ``l1`` with the half-widths.
    """

    dim: int
    radius: float
    half_widths: tuple[float, ...] | None = attrs.field(default=None, converter=_as_widths)
    l1: float = math.inf
    # (-half_widths, half_widths) as read-only arrays for :meth:`clip`, built once: a
    # mechanism clips every chunk (the sensitivity searches, thousands of tiny ones)
    _bounds: tuple[np.ndarray, np.ndarray] | None = attrs.field(
        init=False, default=None, eq=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        if self.dim < 1:
            raise ParameterError(f"a region needs dimension >= 1, got {self.dim}.")
        radius, l1 = float(self.radius), min(float(self.l1), math.sqrt(self.dim) * self.radius)
        if self.half_widths is not None:
            widths = np.asarray(self.half_widths)
            if widths.shape != (self.dim,) or np.any(widths < 0):
                raise ParameterError("half-widths must be one number >= 0 per coordinate.")
            radius = min(radius, float(np.linalg.norm(widths)))
            l1 = min(l1, float(widths.sum()), math.sqrt(self.dim) * radius)
        if not (math.isfinite(radius) and radius >= 0):
            raise ParameterError(f"a region needs a finite radius >= 0, got {self.radius}.")
        object.__setattr__(self, "radius", radius)
        object.__setattr__(self, "l1", l1)
        if self.half_widths is not None:
            high = np.array(self.half_widths)
            low = -high
            high.setflags(write=False)
            low.setflags(write=False)
            object.__setattr__(self, "_bounds", (low, high))

    @property
    def coordinate_bound(self) -> float:
        """A bound on every ``|v_j|``: the largest half-width, and at most the radius."""
        if self.half_widths is None:
            return self.radius
        return min(self.radius, max(self.half_widths))

    @classmethod
    def ball(cls, dim: int, radius: float = 1.0) -> Region:
        """The Euclidean ball ``||v|| <= radius`` (e.g. unit-normalised rows)."""
        return cls(dim, radius)

    @classmethod
    def of_domain(cls, domain: Domain) -> Region:
        """Records of ``domain`` centred at its public centre: ``v = x - domain.centre()``."""
        if cls is Region:
            return _region_of_domain(domain)
        return cls._of_domain(domain)

    @classmethod
    def _of_domain(cls, domain: Domain) -> Region:
        if domain.n_features is None:
            raise DomainError("the domain's feature count is not known yet (bind it to data).")
        radius = domain.radius()
        widths = None
        if domain.has_box:
            lower, upper = domain.box()
            widths = (upper - lower) / 2
        return cls(domain.n_features, radius, widths)

    def project(self, projection: np.ndarray) -> Region:
        """The region of ``u = W^T v`` for a public ``d x p`` matrix ``W``.

        ``||u|| <= ||W||_2 R`` and ``<= sum_j r_j ||W_j,:||``; ``|u_k| <= ||W_:,k|| R`` and
        ``<= sum_j |W_jk| r_j`` (triangle and Cauchy-Schwarz inequalities).
        """
        w = np.asarray(projection, dtype=np.float64)
        if w.ndim != 2 or w.shape[0] != self.dim:
            raise ParameterError(
                f"the projection must have {self.dim} rows (one per feature), got shape {w.shape}."
            )
        if w.size > _MEMO_ENTRIES:  # a large projection costs more to key than to project
            return self._project(w)
        return _projected(self, w.shape, w.tobytes())

    def _project(self, w: np.ndarray) -> Region:
        radius = float(np.linalg.norm(w, 2)) * self.radius
        widths = np.linalg.norm(w, axis=0) * self.radius
        if self.half_widths is not None:
            r = np.asarray(self.half_widths)
            radius = min(radius, float(r @ np.linalg.norm(w, axis=1)))
            widths = np.minimum(widths, r @ np.abs(w))
        # Guard against rounding in the norms: the clip below enforces exactly these bounds.
        return Region(w.shape[1], radius * (1 + 1e-12), widths * (1 + 1e-12))

    def scaled(self, factor: float) -> Region:
        """The region of ``factor * v`` (``factor > 0``)."""
        widths = None if self.half_widths is None else np.asarray(self.half_widths) * factor
        return Region(self.dim, self.radius * factor, widths, l1=self.l1 * factor)

    def clip(self, rows: np.ndarray) -> np.ndarray:
        """Clip ``rows`` (in place) into the region: coordinates to the half-widths, then
        rows to the radius. A no-op on exact arithmetic for rows already inside; it makes
        the region hold by construction (rounding, re-centring at a noisy mean)."""
        if self._bounds is not None:
            rows.clip(*self._bounds, out=rows)
        norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
        over = norms > self.radius
        if over.any():
            rows[over] *= (self.radius / norms[over])[:, None]
        return rows


_MEMO_ENTRIES = 4096


@functools.lru_cache(maxsize=256)
def _projected(region: Region, shape: tuple[int, ...], values: bytes) -> Region:
    """:meth:`Region.project` once per distinct region and projection (its exact values):
    a supervised mechanism projects its region several times per release."""
    return region._project(np.frombuffer(values, dtype=np.float64).reshape(shape))


@functools.lru_cache(maxsize=256)
def _region_of_domain(domain: Domain) -> Region:
    """:meth:`Region.of_domain`, once per distinct domain: both are immutable, and
    mechanisms ask for it several times per release."""
    return Region._of_domain(domain)


def public_count(domain: Domain) -> int:
    """The public record count ``n`` that means divide by (replace-one only)."""
    if domain.relation is not Relation.REPLACE_ONE:
        raise DomainError(
            "this mechanism divides by the record count, which is public only under "
            'replace_one; use relation = "replace_one".'
        )
    if domain.records is None:
        raise DomainError(
            "this mechanism divides by the public record count; declare 'records' in the "
            "domain or load the data first."
        )
    return domain.records


def uncentred_bound(domain: Domain) -> float:
    """A bound on every ``|x_j|`` of an uncentred record: ``max_j |c_j| + r_j`` (the box's
    largest absolute bound, or the centre plus the radius)."""
    region = Region.of_domain(domain)
    return float(np.max(np.abs(domain.centre()))) + region.coordinate_bound


def check_dimension(dimension: int, domain: Domain, what: str = "dimension") -> None:
    """One sentence unless a reduced dimension fits the domain: ``dimension <= m``."""
    m = domain.n_features
    if m is not None and dimension > m:
        raise ParameterError(
            f"{what} = {dimension} exceeds the number of features ({m}); choose {what} <= {m}."
        )


def check_projection(projection: object, domain: Domain | None = None) -> np.ndarray:
    """A public projection as a finite ``m x p`` float array; one sentence otherwise (``m``
    checked against ``domain`` when given)."""
    try:
        w = np.asarray(projection, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError("projection must be a numeric matrix.") from None
    if w.ndim != 2 or 0 in w.shape:
        raise ParameterError(
            f"projection must be a non-empty 2-D matrix (features x dimensions), got shape "
            f"{w.shape}."
        )
    if not np.all(np.isfinite(w)):
        raise ParameterError("projection contains NaN or infinite values.")
    m = None if domain is None else domain.n_features
    if m is not None and w.shape[0] != m:
        raise ParameterError(
            f"projection has {w.shape[0]} rows but the data have {m} features; it must be "
            f"{m} x p (e.g. a Lap-PCA release's components)."
        )
    return w


def vector_sum(region: Region, norm: Norm, change: Change = "replace") -> float:
    """Bound on the change of ``sum_i v_i`` (module docstring, "Vector sum")."""
    single = region.l1 if norm == "l1" else region.radius
    return (2.0 if change == "replace" else 1.0) * single


def kappa(dim: int) -> float:
    """``kappa_d = sqrt(d (d+3) / 2)`` (``kappa_1 = 1``): the spectral constant of the
    upper-triangle L1 bound (module docstring)."""
    return 1.0 if dim == 1 else math.sqrt(dim * (dim + 3) / 2)


def second_moment(region: Region, norm: Norm, change: Change = "replace") -> float:
    """Bound on the change of ``sum_i v_i v_i^T``: upper triangle in L1, svec (Frobenius)
    in L2 (module docstring, "Second moment")."""
    r2 = region.radius**2
    if norm == "l2":
        return math.sqrt(2.0) * r2 if change == "replace" else r2
    if change == "add":
        return (region.l1**2 + r2) / 2
    bound = kappa(region.dim) * r2
    if region.half_widths is not None:
        bound = min(bound, float(sum(region.half_widths)) ** 2)
    return bound


def top_eigenvalues(region: Region, k: int, norm: Norm) -> float:
    """Bound on the change of the ``k`` largest eigenvalues of ``sum_i v_i v_i^T``, replace
    (module docstring, "Top-k eigenvalues")."""
    r2 = region.radius**2
    return (min(k, 2) if norm == "l1" else math.sqrt(min(k, 2))) * r2


def labelled_second_moment(region: Region, label_radius: float, norm: Norm) -> float:
    """Bound on the change of ``sum_i z_i z_i^T`` for ``z = (u, y)``, ``u`` in ``region``,
    ``|y| <= label_radius``, replace (module docstring, "Labelled second moment")."""
    a = float(label_radius)
    if norm == "l2":
        return math.sqrt(2.0) * (region.radius**2 + a**2)
    ell = region.l1
    label_part = 2 * a * ell if a <= ell / 2 else a * ell + a**2 + ell**2 / 4
    return second_moment(region, "l1") + label_part


def labelled_region(region: Region, label_radius: float) -> Region:
    """The region of ``z = (u, y)`` (used for the DP mean of a labelled record)."""
    widths = None
    if region.half_widths is not None:
        widths = (*region.half_widths, label_radius)
    return Region(
        region.dim + 1,
        math.hypot(region.radius, label_radius),
        widths,
        l1=region.l1 + label_radius,
    )


# -- floating-point error of the computed statistic (module docstring) ------------------

UNIT_ROUNDOFF = Fraction(1, 2**53)
"""``u``: the relative error of one rounding to nearest in double precision."""


@functools.lru_cache(maxsize=1024)
def gamma(m: int) -> float:
    """``gamma_m = m u / (1 - m u)`` (Higham, Lemma 3.1), rounded up to a double."""
    if not 0 <= m * UNIT_ROUNDOFF < Fraction(1, 2):
        raise ParameterError(f"no floating-point error bound for {m} accumulated roundings.")
    exact = m * UNIT_ROUNDOFF / (1 - m * UNIT_ROUNDOFF)
    value = float(exact)
    return value if Fraction(value) >= exact else math.nextafter(value, math.inf)


def record_depth(dim: int) -> int:
    """A public bound ``k`` on the roundings chained in computing one record's term: two row
    reductions of ``dim`` terms (a norm, a projection) and 16 elementwise operations, which
    covers every built-in's per-record map (centre, rescale, normalise, project, clip)."""
    return 2 * int(dim) + 16


def accumulation_error(
    terms: int, magnitude: float, depth: int = 0, *, mean: bool = False
) -> float:
    """Bound ``e`` on ``|f^ - f|`` per coordinate for ``f = sum of terms values`` (or their
    mean with ``mean``), each computed with at most ``depth`` chained roundings from one
    record and at most ``magnitude`` in absolute value exactly: ``gamma_{n+k} n m`` (sum),
    ``gamma_{n+k+1} m`` (mean), any summation order (module docstring)."""
    n = max(int(terms), 1)
    if mean:
        return gamma(n + depth + 1) * float(magnitude) * (1 + 2.0**-52)
    return gamma(n + depth) * n * float(magnitude) * (1 + 2.0**-52)


def vector_sum_error(
    region: Region, terms: int, depth: int | None = None, *, mean: bool = False
) -> float:
    """``e`` for ``sum_i v_i`` (or the mean) of ``terms`` records of ``region``; ``depth``
    defaults to :func:`record_depth` of the region's dimension."""
    depth = record_depth(region.dim) if depth is None else depth
    return accumulation_error(terms, region.coordinate_bound, depth, mean=mean)


def second_moment_error(
    region: Region, terms: int, depth: int | None = None, *, mean: bool = False
) -> float:
    """``e`` for the entries of ``sum_i v_i v_i^T`` (or the mean), upper triangle or svec:
    each term ``|v_j v_k| <= b^2`` (``b`` :attr:`Region.coordinate_bound`), times ``sqrt(2)``
    off the diagonal in svec. Each factor carries ``depth`` roundings, the product one and
    the scaling two: ``(1 + gamma_k)^2 (1 + u)^3 - 1 <= gamma_{2k+3}`` (Higham, Lemma 3.3)."""
    depth = record_depth(region.dim) if depth is None else depth
    magnitude = math.sqrt(2.0) * region.coordinate_bound**2
    return accumulation_error(terms, magnitude, 2 * depth + 3, mean=mean)


EIGENSOLVER_CONSTANT = 16
"""``c`` in the symmetric eigensolver's backward error ``||E||_2 <= c d^2 u ||A||_2``: LAPACK
states the bound with an unspecified "modestly growing" ``p(d)`` (Users' Guide, section
4.7); ``c d^2`` is the worst-case order of Householder tridiagonalisation (Wilkinson),
taken generously (an assumption, docs/privacy-promise.md)."""


def top_eigenvalues_error(region: Region, terms: int, depth: int) -> float:
    """``e`` for the computed eigenvalues of the mean second moment ``A`` of ``terms``
    records: Weyl's inequality turns the entries' error ``e_A`` (:func:`second_moment_error`)
    into at most ``||A^ - A||_F <= d e_A``, and the eigensolver adds its backward error on
    ``||A^||_2 <= R^2 + d e_A``. Only the radius is used (rows re-centred at a DP mean are
    clipped to it alone)."""
    d = region.dim
    entries = d * second_moment_error(Region.ball(d, region.radius), terms, depth, mean=True)
    solver = EIGENSOLVER_CONSTANT * d * d * float(UNIT_ROUNDOFF) * (region.radius**2 + entries)
    return (entries + solver) * (1 + 2.0**-50)


def linear_map_error(
    value_error: float,
    magnitude: float,
    left: np.ndarray | None = None,
    right: np.ndarray | None = None,
) -> float:
    """``e`` for ``fl(P F^ Q)`` with public ``P`` (``left``) and ``Q`` (``right``, each
    optional) and a statistic ``F^`` with ``|F^ - F| <= value_error`` and ``|F| <=
    magnitude`` entrywise: ``|P| (|F^ - F| + gamma_{a+b+2} |F^|) |Q|`` (Higham eq. (3.13),
    twice, plus one rounding for each diagonal scaling folded into ``P`` or ``Q``), bounded
    by the largest row sum of ``|P|`` and column sum of ``|Q|``."""
    rows, inner_left = (1.0, 0) if left is None else (_largest_sum(left, 1), left.shape[1])
    cols, inner_right = (1.0, 0) if right is None else (_largest_sum(right, 0), right.shape[0])
    g = gamma(inner_left + inner_right + 2)
    bound = rows * cols * (value_error + g * (magnitude + value_error))
    return bound * (1 + 2.0**-50)


def _largest_sum(matrix: np.ndarray, axis: int) -> float:
    return float(np.max(np.abs(np.asarray(matrix, dtype=np.float64)).sum(axis=axis))) * (
        1 + 2.0**-40
    )
