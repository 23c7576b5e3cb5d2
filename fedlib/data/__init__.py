"""Data: the federated data set type, Synthetic(alpha, beta), LEAF JSON, CIFAR-10, partitions."""
from .clients import FederatedDataset

__all__ = ["FederatedDataset"]
