"""Data: the federated data set type, Synthetic(alpha, beta), LEAF JSON, CIFAR-10, partitions.

Used by chapters 1, 3, 7 and 10 (:func:`fedlib.data.synthetic.synthetic` and
:func:`fedlib.data.partition.dirichlet_partition`, re-exported here).
"""
from .cifar10 import (CIFAR10_CLASSES, CIFAR10_MEAN, CIFAR10_STD, Cifar10Arrays, load_cifar10,
                      load_cifar10_sample)
from .clients import FederatedDataset
from .leaf import load_leaf, save_leaf
from .partition import (OFFICIAL_PARTITION_SEED, class_counts, dirichlet_partition, dirichlet_partition_generator,
                        iid_partition)
from .synthetic import synthetic, synthetic_covariance_diagonal

__all__ = [
    "FederatedDataset", "synthetic", "synthetic_covariance_diagonal", "load_leaf", "save_leaf",
    "Cifar10Arrays", "load_cifar10", "load_cifar10_sample", "CIFAR10_MEAN", "CIFAR10_STD", "CIFAR10_CLASSES",
    "dirichlet_partition", "dirichlet_partition_generator", "iid_partition", "class_counts", "OFFICIAL_PARTITION_SEED",
]
