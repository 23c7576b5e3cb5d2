"""Problems: quadratics (paper §3, App. A) and, elsewhere, Synthetic logistic regression and CIFAR-10.

Used by chapters 2, 3 and 10 (:func:`fedlib.problems.quadratic.random_quadratic`, re-exported here).
"""
from .quadratic import QuadraticProblem, random_quadratic

__all__ = ["QuadraticProblem", "random_quadratic"]
