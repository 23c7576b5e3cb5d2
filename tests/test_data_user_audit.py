"""fedlib.data used as an outside researcher bringing their own data: inputs that used to be
accepted silently or never finished, now refused with a ValueError naming the input."""
import numpy as np
import pytest

from fedlib.data.partition import dirichlet_partition, dirichlet_partition_generator


@pytest.mark.parametrize("fn", [lambda y: dirichlet_partition(y, 4, 0.5, min_size=0),
                                lambda y: dirichlet_partition_generator(y, 4, 0.5, 0, min_size=0)])
def test_partition_refuses_label_ids_instead_of_looping_over_every_class(fn):
    # Labels that are ids, not class numbers: the split loops (and draws) once per class 0..max,
    # so [0, 10**9] never finished; 10**6 took seconds before giving 10**6 empty classes.
    y = np.array([0, 1_000_000] * 20)
    with pytest.raises(ValueError, match=r"num_classes=1000001 .*np\.unique"):
        fn(y)


def test_partition_still_accepts_sparse_small_labels():
    parts = dirichlet_partition(np.array([3, 7] * 50), 4, 0.5)
    assert sorted(np.concatenate(parts).tolist()) == list(range(100))


def test_federated_dataset_refuses_rows_without_features():
    from fedlib.data.clients import FederatedDataset
    empty = [np.zeros((0, 0))], [np.zeros(0, dtype=np.int64)]
    with pytest.raises(ValueError, match=r"client 0 train x has 3 rows of 0 features"):
        FederatedDataset([np.zeros((3, 0))], [np.array([0, 1, 0])], *empty, num_classes=2)
    # an empty (0, 0) test set stays fine
    FederatedDataset([np.ones((3, 2))], [np.array([0, 1, 0])], *empty, num_classes=2)
