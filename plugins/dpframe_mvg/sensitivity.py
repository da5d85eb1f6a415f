"""Sensitivities of the MVG plugin's queries: the one place they are computed.

Orientation (stated once, used everywhere in this plugin): **records are the rows of X**
(N x d, as in :class:`dpframe.Dataset`), and a query ``f(X)`` is an ``m x n`` matrix.
The identity query is ``m x n = N x d``; the covariance is ``d x d``. The paper puts
records in columns; its Theorem 2 is invariant under transposing ``f`` (``s2``, ``gamma``,
``r`` and ``m n`` do not change and the condition is symmetric in Sigma and Psi), so
nothing is lost. Neighbouring datasets differ in one record (replace-one; N public).

The set of clipped records. :class:`dpframe.Domain` clips a row to the box, then scales it
into the row-norm ball. Scaling ``x`` by ``t in (0, 1]`` keeps each coordinate between 0
and ``x_j``, so with both a box and a ball the clipped rows lie in the box **widened to
contain 0**, ``[min(lo_j, 0), max(hi_j, 0)]``, intersected with the ball. Write ``lo, hi``
for that (widened) range, ``c`` for the domain's public centre, and

* ``w_j = hi_j - lo_j``: ``|x_j - x'_j| <= w_j``;
* ``b_j = max(hi_j - c_j, c_j - lo_j)``: ``|x_j - c_j| <= b_j``;
* ``D = sup ||x - x'||``: ``||w||_2`` (box) or ``2R`` (ball of radius R), the smaller;
* ``Rc = sup ||x - c||``: ``||b||_2`` (box) or ``R + ||c||_2`` (ball), the smaller.

Query sensitivities (Frobenius, ``s2 = sup ||f(X) - f(X')||_F``) and output bounds
(``gamma = sup ||f(X)||_F``), used by Theorems 2 and 3:

* identity, ``f(X) = X - 1 c^T`` (the centre is added back after the noise, which is
  post-processing): ``f(X) - f(X') = e_k (x - x')^T``, so ``s2 = D``; and
  ``||f(X)||_F^2 = sum_i ||x_i - c||^2 <= N Rc^2``, so ``gamma = sqrt(N) Rc``.
* covariance, ``f(X) = (1/N) sum_i v_i v_i^T`` with ``v_i = x_i - c`` (centred at the
  public centre, normalised by the public N): ``f(X) - f(X') = (v v^T - u u^T)/N`` and
  ``||v v^T - u u^T||_F^2 = ||v||^4 + ||u||^4 - 2 (v.u)^2 <= 2 Rc^4``, so
  ``s2 = sqrt(2) Rc^2 / N``; ``||f(X)||_F <= (1/N) sum_i ||v_i||^2 <= Rc^2 = gamma``.
* custom: the user's declarations (the output is projected onto what was declared, see
  :mod:`dpframe_mvg.queries`).

Whitened sensitivities (the exact calibration). With ``Sigma = A A^T``, ``Psi = B B^T``,
``vec(Z) ~ N(0, Psi (x) Sigma)`` and ``A^-1 (f(X) + Z) B^-T = A^-1 f(X) B^-T + G`` with G
iid standard normal: an invertible public map of the release, so the MVG mechanism is
exactly the Gaussian mechanism with unit noise on the whitened query, i.e.
``mu``-GDP with ``mu = sup ||A^-1 (f(X) - f(X')) B^-T||_F`` (Dong, Roth, Su 2019).
Directional noise has ``Psi = U diag(1/q) U^T`` (``q_j`` the precision, inverse
variance, of direction ``u_j``; ``q_j = 0`` drops the direction: the query is projected
off it, so it contributes nothing) and ``Sigma = I_m`` (unimodal) or ``Sigma = Psi``
(equi-modal), hence ``B^-1 = diag(sqrt q) U^T``. Every bound below has the form

    S(q) = min( (sum_j a_j q_j)^h , (k * max_j q_j)^h ),

either term possibly absent, with ``h = 1/2`` (unimodal) or ``h = 1`` (equi-modal).

* identity, unimodal: ``||e_k v^T B^-T||_F^2 = ||B^-1 v||^2 = sum_j q_j (u_j . v)^2`` with
  ``v = x - x'``. Box: ``|u_j . v| <= |u_j| . w`` (triangle inequality), so
  ``a_j = (|u_j| . w)^2``; ball: ``sum_j q_j (u_j . v)^2 <= max q ||v||^2``, ``k = D^2``.
  Attained (equality) for a box without a ball and axis-aligned directions (``x = hi``,
  ``x' = lo``), and for a ball without a box (``x = -x' = R u_j*``).
* covariance, equi-modal: with ``y = B^-1 v``, ``z = B^-1 u``, the whitened change is
  ``(y y^T - z z^T)/N`` and ``||y y^T - z z^T||_F^2 = ||y||^4 + ||z||^4 - 2 (y.z)^2
  <= 2 K^2`` with ``K = sup_v ||B^-1 v||^2``; the same two bounds on K (``b`` in place
  of ``w``, ``Rc`` in place of D) give ``a_j = sqrt(2)/N (|u_j| . b)^2`` and
  ``k = sqrt(2) Rc^2 / N``. Not always attained: ``u = c`` attains ``K/N``, so the bound
  is tight within a factor ``sqrt(2)``, and attained when two extreme records whiten to
  orthogonal vectors (e.g. an even number of equal-width features, uniform precision).
* covariance, unimodal: ``||(v v^T - u u^T) B^-T||_F <= ||v|| ||B^-1 v|| + ||u|| ||B^-1 u||
  <= 2 Rc sqrt(K)`` (triangle inequality), and ``<= ||v v^T - u u^T||_F ||B^-1||_2
  <= sqrt(2) Rc^2 sqrt(max q)``; so ``a_j = (2 Rc / N)^2 (|u_j| . b)^2`` and
  ``k = 2 Rc^4 / N^2`` (the ball part of K is dominated by the second bound).
* custom (only ``s2`` known): ``||A^-1 Delta B^-T||_F <= ||A^-1||_2 ||B^-1||_2 s2``,
  i.e. ``k = s2^2`` (unimodal) or ``k = s2`` (equi-modal). Nothing better holds for every
  query with Frobenius sensitivity s2 (a change aligned with the least noisy directions
  attains it), so for custom queries directional noise cannot lower the noise anywhere.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from dpframe import Domain
from dpframe.errors import DomainError, ParameterError
from dpframe_mvg.directions import is_axis_aligned


@attrs.frozen
class RecordBounds:
    """Public bounds on one clipped record (see the module docstring)."""

    centre: np.ndarray
    widths: np.ndarray | None  # w: |x_j - x'_j| <= w_j (None without a box)
    half_ranges: np.ndarray | None  # b: |x_j - c_j| <= b_j (None without a box)
    diff_norm: float  # D = sup ||x - x'||
    centred_norm: float  # Rc = sup ||x - c||
    has_ball: bool


def record_bounds(domain: Domain) -> RecordBounds:
    """Bounds on a clipped record of ``domain``; one sentence if the records are unbounded."""
    if domain.n_features is None:
        raise DomainError(
            "the domain does not fix the number of features; declare feature names or "
            "per-feature bounds in the domain."
        )
    if not domain.has_box and domain.row_norm_bound is None:
        raise DomainError(
            "the MVG mechanism needs bounded records; declare feature bounds or row_norm_bound."
        )
    centre = domain.centre()
    diff, centred = [], []
    widths = half = None
    if domain.has_box:
        lo, hi = domain.box()
        if domain.row_norm_bound is not None:
            lo, hi = np.minimum(lo, 0.0), np.maximum(hi, 0.0)
        widths = hi - lo
        half = np.maximum(hi - centre, centre - lo)
        diff.append(float(np.linalg.norm(widths)))
        centred.append(float(np.linalg.norm(half)))
    if domain.row_norm_bound is not None:
        radius = float(domain.row_norm_bound)
        diff.append(2 * radius)
        centred.append(radius + float(np.linalg.norm(centre)))
    return RecordBounds(
        centre=centre,
        widths=widths,
        half_ranges=half,
        diff_norm=min(diff),
        centred_norm=min(centred),
        has_ball=domain.row_norm_bound is not None,
    )


@attrs.frozen
class QuerySpec:
    """Public facts about a query: shape ``m x n``, Frobenius sensitivity ``s2``, output
    bound ``gamma`` (None when undeclared), and whether every output is symmetric PSD."""

    name: str
    shape: tuple[int, int]
    l2_sensitivity: float
    norm_bound: float | None
    psd: bool

    @property
    def square(self) -> bool:
        return self.shape[0] == self.shape[1]


def builtin_query_spec(query: str, domain: Domain) -> QuerySpec:
    """``s2`` and ``gamma`` of the identity and covariance queries (module docstring)."""
    bounds = record_bounds(domain)
    n_records = _records(domain)
    d = int(domain.n_features)
    if query == "identity":
        return QuerySpec(
            "identity",
            (n_records, d),
            bounds.diff_norm,
            math.sqrt(n_records) * bounds.centred_norm,
            psd=False,
        )
    if query == "covariance":
        rc2 = bounds.centred_norm**2
        return QuerySpec("covariance", (d, d), math.sqrt(2) * rc2 / n_records, rc2, psd=True)
    raise ParameterError(f"unknown built-in query {query!r}.")


@attrs.frozen
class WhitenedSensitivity:
    """``S(q) = min((sum_j a_j q_j)^h, (k max_j q_j)^h)`` (module docstring).

    ``linear`` is ``a`` (None when absent), ``cap`` is ``k`` (None when absent), ``power``
    is ``h``. ``attained`` says whether neighbouring datasets reach ``S(q)`` exactly.
    """

    power: float
    linear: np.ndarray | None
    cap: float | None
    attained: bool

    def value(self, precisions: np.ndarray) -> float:
        """The whitened sensitivity of noise with per-direction precisions ``q``."""
        q = np.asarray(precisions, dtype=np.float64)
        terms = []
        if self.linear is not None:
            terms.append(math.fsum(self.linear * q))
        if self.cap is not None:
            terms.append(self.cap * float(q.max()))
        return min(terms) ** self.power


def whitened_sensitivity(
    spec: QuerySpec, domain: Domain | None, directions: np.ndarray, equimodal: bool
) -> WhitenedSensitivity:
    """The whitened-sensitivity functional of ``spec`` for noise along ``directions``
    (columns, orthonormal), unimodal or equi-modal (module docstring)."""
    power = 1.0 if equimodal else 0.5
    if spec.name == "custom":
        cap = spec.l2_sensitivity if equimodal else spec.l2_sensitivity**2
        return WhitenedSensitivity(power, None, cap, attained=False)
    assert domain is not None
    bounds = record_bounds(domain)
    abs_u = np.abs(directions)
    if spec.name == "identity":
        linear = None if bounds.widths is None else (abs_u.T @ bounds.widths) ** 2
        aligned = is_axis_aligned(directions)
        attained = (bounds.widths is not None and not bounds.has_ball and aligned) or (
            bounds.widths is None
        )
        return WhitenedSensitivity(power, linear, bounds.diff_norm**2, attained)
    n_records = _records(domain)
    rc = bounds.centred_norm
    box = None if bounds.half_ranges is None else (abs_u.T @ bounds.half_ranges) ** 2
    if equimodal:
        scale = math.sqrt(2) / n_records
        linear = None if box is None else scale * box
        return WhitenedSensitivity(power, linear, scale * rc**2, attained=False)
    linear = None if box is None else (2 * rc / n_records) ** 2 * box
    return WhitenedSensitivity(power, linear, 2 * rc**4 / n_records**2, attained=False)


def _records(domain: Domain) -> int:
    if domain.records is None:
        raise DomainError(
            "the MVG queries use the public record count; declare 'records' in the domain or "
            "load the data first."
        )
    return domain.records
