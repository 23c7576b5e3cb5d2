"""Engines that run federated rounds: the sequential reference loop, the batched
in-memory engine (Synthetic/LEAF), the stacked-client torch engine (CIFAR-10) and the
torch.distributed backend. All call :meth:`fedlib.algorithms.FederatedAlgorithm.apply`."""
