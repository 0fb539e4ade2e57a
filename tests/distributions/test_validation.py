"""validate_args: the same errors (type and message) as PyTorch for bad parameters and values,
the switch per instance and by default, and the argument checks of the constructors."""
import re

import numpy as np
import pytest

import dualflow as flow

torch = pytest.importorskip("torch")
D, TD = flow.distributions, torch.distributions


def _gist(message: str) -> str:
    """The message up to the first tensor print (the printed tensors differ by library)."""
    return re.split(r"tensor\(|dualflow\.|torch\.", str(message))[0]


def _same_error(make_ours, make_theirs, same_text=True):
    with pytest.raises(Exception) as theirs:
        make_theirs()
    with pytest.raises(type(theirs.value)) as ours:
        make_ours()
    if same_text:
        assert _gist(ours.value) == _gist(theirs.value), (str(ours.value), str(theirs.value))


BAD_PARAMETERS = [
    ("Normal", lambda d, t: d.Normal(t([0.0, 1.0]), t([1.0, -1.0]))),
    ("Normal_nan", lambda d, t: d.Normal(t([float("nan")]), t([1.0]))),
    ("Uniform", lambda d, t: d.Uniform(t([0.0, 2.0]), t([1.0, 1.0]))),
    ("Bernoulli", lambda d, t: d.Bernoulli(probs=t([0.2, 1.5]))),
    ("Categorical", lambda d, t: d.Categorical(probs=t([[0.2, -0.1, 0.9]]))),
    ("OneHotCategorical", lambda d, t: d.OneHotCategorical(probs=t([-0.5, 1.5]))),
    ("Gamma", lambda d, t: d.Gamma(t([1.0, 0.0]), t([1.0, 1.0]))),
    ("Beta", lambda d, t: d.Beta(t([1.0]), t([-2.0]))),
    ("MVN_tril", lambda d, t: d.MultivariateNormal(t([0.0, 0.0]),
                                                   scale_tril=t([[1.0, 0.0], [0.5, -1.0]]))),
    ("MVN_tril_upper", lambda d, t: d.MultivariateNormal(t([0.0, 0.0]),
                                                         scale_tril=t([[1.0, 0.3], [0.0, 1.0]]))),
]


@pytest.mark.parametrize("name,make", BAD_PARAMETERS, ids=[b[0] for b in BAD_PARAMETERS])
def test_bad_parameters_raise_as_pytorch(name, make):
    # PyTorch's Beta is a Dirichlet inside and names that; ours names the Beta's own parameter
    _same_error(lambda: make(D, flow.tensor), lambda: make(TD, torch.tensor),
                same_text=name != "Beta")
    # validate_args=False accepts them, as PyTorch does
    make_unchecked = {"Normal": lambda: D.Normal(flow.tensor([0.0]), flow.tensor([-1.0]),
                                                  validate_args=False)}
    if name in make_unchecked:
        make_unchecked[name]()


BAD_VALUES = [
    ("Normal_shape", lambda d, t: d.Normal(t([0.0, 1.0]), t([1.0, 1.0])),
     lambda t: t([1.0, 2.0, 3.0])),
    ("Bernoulli_support", lambda d, t: d.Bernoulli(t([0.3])), lambda t: t([0.5])),
    ("Uniform_support", lambda d, t: d.Uniform(t([0.0]), t([1.0])), lambda t: t([1.5])),
    ("Categorical_support", lambda d, t: d.Categorical(t([0.3, 0.7])), lambda t: t(2)),
    ("Gamma_support", lambda d, t: d.Gamma(t([1.0]), t([1.0])), lambda t: t([-1.0])),
    ("Beta_support", lambda d, t: d.Beta(t([1.0]), t([1.0])), lambda t: t([1.5])),
    ("OneHot_event", lambda d, t: d.OneHotCategorical(t([0.3, 0.7])), lambda t: t([1.0, 0.0, 0.0])),
    ("OneHot_support", lambda d, t: d.OneHotCategorical(t([0.3, 0.7])), lambda t: t([1.0, 1.0])),
    ("MVN_event", lambda d, t: d.MultivariateNormal(t([0.0, 0.0]), t([[1.0, 0.0], [0.0, 1.0]])),
     lambda t: t([1.0, 2.0, 3.0])),
    ("not_a_tensor", lambda d, t: d.Normal(t([0.0]), t([1.0])), lambda t: [0.5]),
]


@pytest.mark.parametrize("name,make,value", BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_bad_values_raise_as_pytorch(name, make, value):
    # PyTorch's Beta prints as "Beta()" (its parameters live in a Dirichlet inside)
    _same_error(lambda: make(D, flow.tensor).log_prob(value(flow.tensor)),
                lambda: make(TD, torch.tensor).log_prob(value(torch.tensor)),
                same_text=not name.startswith("Beta"))


def test_validate_args_false_skips_the_checks():
    dist = D.Bernoulli(flow.tensor([0.3]), validate_args=False)
    assert np.isfinite(dist.log_prob(flow.tensor([1.0])).numpy()).all()
    dist.log_prob(flow.tensor([0.5]))           # outside the support: no error


def test_set_default_validate_args():
    try:
        D.Distribution.set_default_validate_args(False)
        D.Normal(flow.tensor([0.0]), flow.tensor([-1.0]))       # accepted
        with pytest.raises(ValueError, match="Expected parameter scale"):
            D.Normal(flow.tensor([0.0]), flow.tensor([-1.0]), validate_args=True)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError, match="Expected parameter scale"):
        D.Normal(flow.tensor([0.0]), flow.tensor([-1.0]))
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")


CONSTRUCTOR_ERRORS = [
    ("both_probs_and_logits", lambda d, t: d.Bernoulli(probs=t([0.5]), logits=t([0.0]))),
    ("neither", lambda d, t: d.Categorical()),
    ("categorical_0d", lambda d, t: d.Categorical(probs=t(0.5))),
    ("mvn_two_matrices", lambda d, t: d.MultivariateNormal(
        t([0.0]), covariance_matrix=t([[1.0]]), scale_tril=t([[1.0]]))),
    ("mvn_loc_0d", lambda d, t: d.MultivariateNormal(t(0.0), covariance_matrix=t([[1.0]]))),
    ("mvn_matrix_1d", lambda d, t: d.MultivariateNormal(t([0.0]), scale_tril=t([1.0]))),
    ("independent_too_many", lambda d, t: d.Independent(d.Normal(t([0.0]), t([1.0])), 2)),
]


@pytest.mark.parametrize("name,make", CONSTRUCTOR_ERRORS, ids=[c[0] for c in CONSTRUCTOR_ERRORS])
def test_constructor_errors_as_pytorch(name, make):
    _same_error(lambda: make(D, flow.tensor), lambda: make(TD, torch.tensor))


def test_mvn_matrix_of_the_wrong_size_names_the_shapes():
    with pytest.raises(ValueError, match=r"covariance_matrix of shape \(3, 3\) does not match loc"):
        D.MultivariateNormal(flow.zeros(2), covariance_matrix=flow.eye(3))


def test_kl_without_a_closed_form_raises_as_pytorch():
    _same_error(lambda: D.kl_divergence(D.Uniform(0.0, 1.0), D.Bernoulli(0.5)),
                lambda: TD.kl_divergence(TD.Uniform(0.0, 1.0), TD.Bernoulli(0.5)))
    with pytest.raises(TypeError):
        D.register_kl(int, D.Normal)


def test_broadcast_all_rejects_other_types():
    with pytest.raises(ValueError, match="must all be instances of numbers.Number"):
        D.Normal("0", 1.0)
