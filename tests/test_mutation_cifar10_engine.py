"""Mutation-testing pass on the non-Table-1 parts of ``fedlib/experiments/cifar10.py`` (data,
fingerprint, ``train_runs``, the benchmark helpers, the chapter-5 helpers) and on
``fedlib/problems/quadratic.py``: each test pins behaviour that a surviving mutant changed, with
its expected value worked out independently (by hand, from REFERENCE.md §4, or by a plain
numpy computation). Training tests use tiny synthetic images, width 0.03 and one round."""
import math

import numpy as np
import pytest

from fedlib.experiments import cifar10 as C
from fedlib.problems.quadratic import QuadraticProblem, random_quadratic


# ------------------------------------------------------------------ quadratic.py
@pytest.mark.parametrize("high", [float("nan"), float("inf")])
def test_random_quadratic_refuses_a_non_finite_upper_eigenvalue(high):
    # nan / inf passed the low <= high check and raised numpy's OverflowError from uniform()
    with pytest.raises(ValueError, match=r"^eig_range\[1\] must be a finite number > 0, got "):
        random_quadratic(2, 3, eig_range=(0.5, high))
