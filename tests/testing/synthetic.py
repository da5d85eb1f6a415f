"""Small mechanisms for the kit's own tests: correct ones, and ones with planted bugs.

Each bug is one a real plugin could ship; the tests assert that the kit catches it and
say which layer does.
"""

from __future__ import annotations

import math
import random

import attrs
import numpy as np

from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Relation, Release, Sensitivity
from dpframe.errors import DataError, ParameterError
from dpframe.privacy.calibration import laplace_scale, split_gaussian
from dpframe.privacy.events import GaussianEvent, LaplaceEvent, PrivacyEvent, compose
from dpframe.privacy.samplers import Sampler, SecureSampler
from dpframe.releases.linalg import upper_triangle


@attrs.frozen(kw_only=True)
class EpsilonParams(PrivacyParams):
    pass


@attrs.frozen(kw_only=True)
class GaussianParams(PrivacyParams):
    def __attrs_post_init__(self) -> None:
        if not 0 < self.delta < 1:
            raise ParameterError("needs 0 < delta < 1.")


class NoisySum(Mechanism):
    """Per-feature sums plus Laplace noise; replace-one (L1 sensitivity: the sum of the
    widths) and add/remove (the sum of the largest absolute values)."""

    name = "kit-noisysum"
    relations = (Relation.REPLACE_ONE, Relation.ADD_REMOVE)
    Params = EpsilonParams

    def declared(self, domain: Domain) -> float:
        lo, hi = domain.box()
        if domain.relation is Relation.REPLACE_ONE:
            return float(np.sum(hi - lo))
        return float(np.sum(np.maximum(np.abs(lo), np.abs(hi))))

    def sensitivity(self, params: EpsilonParams, domain: Domain) -> dict[str, Sensitivity]:
        return {"sum": Sensitivity(self.declared(domain), "l1", domain.relation)}

    def plan(self, params: EpsilonParams, domain: Domain) -> PrivacyEvent:
        self.sensitivity(params, domain)
        return LaplaceEvent(1.0 / params.epsilon, relation=domain.relation)

    def query(self, dataset: Dataset, params: EpsilonParams) -> dict[str, np.ndarray]:
        return {"sum": dataset.features.sum(axis=0)}

    def scale(self, dataset: Dataset, params: EpsilonParams) -> float:
        return laplace_scale(params.epsilon, self.sensitivity(params, dataset.domain)["sum"].value)

    def run(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler) -> Release:
        value = self.query(dataset, params)["sum"]
        scale = self.scale(dataset, params)
        noisy = value + sampler.laplace(scale, value.shape)
        return Release(arrays={"sum": noisy}, noise_scales={"sum": scale})

    def noisy_stages(
        self, dataset: Dataset, params: EpsilonParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        value = self.query(dataset, params)["sum"]
        return {"sum": value + sampler.laplace(self.scale(dataset, params), (count, value.size))}


class TwoStageGaussian(Mechanism):
    """Mean and centred second moment (upper triangle), Gaussian noise, the budget split
    in half through mu-GDP (``split_gaussian``)."""

    name = "kit-twostage"
    Params = GaussianParams

    def sensitivity(self, params: GaussianParams, domain: Domain) -> dict[str, Sensitivity]:
        n, r = domain.records, domain.radius()
        return {
            "mean": Sensitivity(2 * r / n, "l2"),
            "moment": Sensitivity(math.sqrt(2) * r**2 / n, "l2"),
        }

    def plan(self, params: GaussianParams, domain: Domain) -> PrivacyEvent:
        z = split_gaussian(params.epsilon, params.delta, [0.5, 0.5])
        return compose(*(GaussianEvent(m, relation=domain.relation) for m in z))

    def query(self, dataset: Dataset, params: GaussianParams) -> dict[str, np.ndarray]:
        v = dataset.features - dataset.domain.centre()
        return {"mean": dataset.features.mean(axis=0), "moment": upper_triangle(v.T @ v) / len(v)}

    def scales(self, dataset: Dataset, params: GaussianParams) -> dict[str, float]:
        z = split_gaussian(params.epsilon, params.delta, [0.5, 0.5])
        sens = self.sensitivity(params, dataset.domain)
        return {"mean": z[0] * sens["mean"].value, "moment": z[1] * sens["moment"].value}

    def run(self, dataset: Dataset, params: GaussianParams, sampler: Sampler) -> Release:
        query, scales = self.query(dataset, params), self.scales(dataset, params)
        arrays = {k: v + sampler.gaussian(scales[k], v.shape) for k, v in query.items()}
        return Release(arrays=arrays, noise_scales=scales)

    def noisy_stages(
        self, dataset: Dataset, params: GaussianParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        query, scales = self.query(dataset, params), self.scales(dataset, params)
        return {k: v + sampler.gaussian(scales[k], (count, v.size)) for k, v in query.items()}


class ClassSums(NoisySum):
    """Per-class feature sums plus Laplace noise. Under replace-one a record may change
    class, so one record moves two class sums: L1 sensitivity ``2 sum_j max|x_j|``
    (or the sum of the widths if larger)."""

    name = "kit-classsums"
    relations = (Relation.REPLACE_ONE,)

    def declared(self, domain: Domain) -> float:
        lo, hi = domain.box()
        return float(max(np.sum(hi - lo), 2 * np.sum(np.maximum(np.abs(lo), np.abs(hi)))))

    def query(self, dataset: Dataset, params: EpsilonParams) -> dict[str, np.ndarray]:
        labels = dataset.require_labels()
        k = len(dataset.domain.classes().values)
        sums = np.zeros((k, dataset.n_features))
        np.add.at(sums, labels, dataset.features)
        return {"sum": sums.ravel()}


class LabelMean(NoisySum):
    """Mean of a bounded numeric label plus Laplace noise: sensitivity (upper - lower)/n."""

    name = "kit-labelmean"
    relations = (Relation.REPLACE_ONE,)

    def declared(self, domain: Domain) -> float:
        target = domain.target()
        return (target.upper - target.lower) / domain.records

    def query(self, dataset: Dataset, params: EpsilonParams) -> dict[str, np.ndarray]:
        return {"sum": np.array([dataset.require_labels().mean()])}


# -- planted bugs ---------------------------------------------------------------------------


class UnderstatedSum(NoisySum):
    """Declares the sum's sensitivity 1.2 times too small (a subtle constant error)."""

    def declared(self, domain: Domain) -> float:
        return super().declared(domain) / 1.2


class ReplaceOneAsAddRemove(NoisySum):
    """Uses the add/remove sensitivity (the largest absolute value) under replace-one,
    which needs the width: half the truth on a box symmetric about zero."""

    def declared(self, domain: Domain) -> float:
        lo, hi = domain.box()
        return float(np.sum(np.maximum(np.abs(lo), np.abs(hi))))


class ClassSumsIgnoringLabelChange(ClassSums):
    """Forgets that a replaced record may change class: one class sum moves, it says."""

    def declared(self, domain: Domain) -> float:
        lo, hi = domain.box()
        return float(np.sum(hi - lo))


class HalfRangeLabelMean(LabelMean):
    """Takes the target's radius (half the range) as the change of one label."""

    def declared(self, domain: Domain) -> float:
        return super().declared(domain) / 2


class PrivateCentredVariance(NoisySum):
    """The second moment of feature 0 about the *private* mean, released with the
    sensitivity of the moment about the public centre, ``r^2 / n`` (PRIVACY-NOTES rule 1)."""

    name = "kit-privatevariance"
    relations = (Relation.REPLACE_ONE,)

    def declared(self, domain: Domain) -> float:
        lo, hi = domain.box()
        return float(((hi[0] - lo[0]) / 2) ** 2 / domain.records)

    def query(self, dataset: Dataset, params: EpsilonParams) -> dict[str, np.ndarray]:
        return {"sum": np.array([dataset.features[:, 0].var()])}


class LeakyRelease(NoisySum):
    """Releases the noise it added next to the noisy sum; its noisy_stages is honest
    about the sum, so only an audit of run()'s arrays sees the leak."""

    def run(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler) -> Release:
        value = self.query(dataset, params)["sum"]
        scale = self.scale(dataset, params)
        noise = sampler.laplace(scale, value.shape)
        return Release(arrays={"sum": value + noise, "noise": noise}, noise_scales={"sum": scale})


class LyingStages(NoisySum):
    """Its noisy_stages adds a third of run()'s noise (a hook out of step with run)."""

    def noisy_stages(
        self, dataset: Dataset, params: EpsilonParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        value = self.query(dataset, params)["sum"]
        scale = self.scale(dataset, params) / 3
        return {"sum": value + sampler.laplace(scale, (count, value.size))}


class DataScaledNoise(NoisySum):
    """Scales its noise by the data's own range instead of the declared sensitivity."""

    def scale(self, dataset: Dataset, params: EpsilonParams) -> float:
        x = dataset.features
        return float(np.sum(x.max(axis=0) - x.min(axis=0))) / params.epsilon + 1e-12


class OverclaimingPlan(NoisySum):
    """Plans a Laplace event with twice the noise multiplier it uses (claims eps/2)."""

    def plan(self, params: EpsilonParams, domain: Domain) -> PrivacyEvent:
        return LaplaceEvent(2.0 / params.epsilon, relation=domain.relation)


class GlobalRandom(NoisySum):
    """Draws its noise from numpy's global generator."""

    def run(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler) -> Release:
        value = self.query(dataset, params)["sum"]
        scale = self.scale(dataset, params)
        noisy = value + np.random.laplace(0, scale, value.shape)  # noqa: NPY002 - the bug
        return Release(arrays={"sum": noisy}, noise_scales={"sum": scale})


class StdlibRandom(NoisySum):
    """Draws its noise from Python's global ``random``."""

    def run(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler) -> Release:
        value = self.query(dataset, params)["sum"]
        scale = self.scale(dataset, params)
        noise = np.array([random.expovariate(1 / scale) * random.choice((-1, 1)) for _ in value])
        return Release(arrays={"sum": value + noise}, noise_scales={"sum": scale})


class IgnoresSeed(NoisySum):
    """Draws from a fresh secure sampler instead of the one it is given."""

    def run(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler) -> Release:
        return super().run(dataset, params, SecureSampler())

    def noisy_stages(
        self, dataset: Dataset, params: EpsilonParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        return super().noisy_stages(dataset, params, SecureSampler(), count)


class RefusesBoundaryRecords(NoisySum):
    """Refuses data with a record on feature 0's upper bound: the refusal itself tells
    neighbouring datasets apart."""

    def query(self, dataset: Dataset, params: EpsilonParams) -> dict[str, np.ndarray]:
        _, hi = dataset.domain.box()
        if np.any(dataset.features[:, 0] >= hi[0]):
            raise DataError("a record lies on the upper bound of feature 0.")
        return super().query(dataset, params)


class PublicWidth(NoisySum):
    """NoisySum plus the domain's box width, a public stage declared with sensitivity 0 and
    released unnoised (noise scale 0)."""

    def sensitivity(self, params: EpsilonParams, domain: Domain) -> dict[str, Sensitivity]:
        return {**super().sensitivity(params, domain), "width": Sensitivity(0.0, "l1")}

    def query(self, dataset: Dataset, params: EpsilonParams) -> dict[str, np.ndarray]:
        lo, hi = dataset.domain.box()
        return {**super().query(dataset, params), "width": hi - lo}

    def run(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler) -> Release:
        release = super().run(dataset, params, sampler)
        width = self.query(dataset, params)["width"]
        return Release(
            arrays={**release.arrays, "width": width},
            noise_scales={**release.noise_scales, "width": 0.0},
        )

    def noisy_stages(
        self, dataset: Dataset, params: EpsilonParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        width = self.query(dataset, params)["width"]
        return {
            **super().noisy_stages(dataset, params, sampler, count),
            "width": np.tile(width, (count, 1)),
        }


class PrivateWidth(PublicWidth):
    """Claims sensitivity 0 for the data's own per-feature maximum, released unnoised."""

    def query(self, dataset: Dataset, params: EpsilonParams) -> dict[str, np.ndarray]:
        return {**NoisySum.query(self, dataset, params), "width": dataset.features.max(axis=0)}


class InfoMax(NoisySum):
    """Puts the exact largest value of feature 0 in ``info``."""

    def run(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler) -> Release:
        release = super().run(dataset, params, sampler)
        release.info = {"max": [float(dataset.features[:, 0].max())]}
        return release


class ScaleLeak(NoisySum):
    """Reports the exact largest value of feature 0 as the noise scale of no stage."""

    def run(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler) -> Release:
        release = super().run(dataset, params, sampler)
        release.noise_scales["max"] = float(dataset.features[:, 0].max())
        return release
