"""StudentT(df, loc, scale), Chi2(df) and FisherSnedecor(df1, df2): the families built from
Gamma draws."""
from __future__ import annotations

import math

from .. import creation, ops
from ..size import Size
from . import constraints
from .distribution import Distribution
from .gamma import Gamma
from .utils import broadcast_all, tiny_of


class Chi2(Gamma):
    """The chi-squared distribution with `df` degrees of freedom: Gamma(df / 2, 1 / 2)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(Chi2, _instance))

    @property
    def df(self):
        return self.concentration * 2


class StudentT(Distribution):
    """Student's t with `df` degrees of freedom, shifted by `loc` and scaled by `scale`;
    rsample is loc + scale * X / sqrt(Z / df) with X normal and Z chi-squared draws."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(StudentT, batch_shape, _instance, ("df", "loc", "scale"))
        new._chi2 = self._chi2.expand(batch_shape)
        return new

    @property
    def mean(self):
        return ops.where(self.df > 1, self.loc, float("nan"))

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        finite = self.scale.pow(2) * self.df / (self.df - 2)
        return ops.where(self.df > 2, finite, ops.where(self.df > 1, float("inf"), float("nan")))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        x = creation.randn(*shape, dtype=self.df.dtype, device=self.df.device)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * x * (z / self.df).rsqrt()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        half_df = 0.5 * self.df
        norm = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
                + ops.lgamma(half_df) - ops.lgamma(half_df + 0.5))
        return -0.5 * (self.df + 1.0) * (y.pow(2) / self.df).log1p() - norm

    def entropy(self):
        half_df = 0.5 * self.df
        log_beta = ops.lgamma(half_df) + math.lgamma(0.5) - ops.lgamma(half_df + 0.5)
        return (self.scale.log()
                + (half_df + 0.5) * (ops.digamma(half_df + 0.5) - ops.digamma(half_df))
                + 0.5 * self.df.log() + log_beta)


class FisherSnedecor(Distribution):
    """The F distribution: (X1 / df1) / (X2 / df2) for chi-squared X1, X2."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        super().__init__(self.df1.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(FisherSnedecor, batch_shape, _instance, ("df1", "df2"))
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    @property
    def mean(self):
        return ops.where(self.df2 > 2, self.df2 / (self.df2 - 2), float("nan"))

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return ops.where(self.df1 > 2, mode, float("nan"))

    @property
    def variance(self):
        d1, d2 = self.df1, self.df2
        value = 2 * d2.pow(2) * (d1 + d2 - 2) / (d1 * (d2 - 2).pow(2) * (d2 - 4))
        return ops.where(d2 > 4, value, float("nan"))

    def rsample(self, sample_shape=Size()):
        tiny = tiny_of(self.df1.dtype)
        x1 = self._gamma1.rsample(sample_shape)
        x2 = self._gamma2.rsample(sample_shape).clamp(min=tiny)
        return (x1 / x2).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        ct1, ct2 = self.df1 * 0.5, self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = ops.lgamma(ct1 + ct2) - ops.lgamma(ct1) - ops.lgamma(ct2)
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3
