"""Problems: quadratics (paper §3, App. A) and, elsewhere, Synthetic logistic regression and CIFAR-10."""
from .quadratic import QuadraticProblem, random_quadratic

__all__ = ["QuadraticProblem", "random_quadratic"]
