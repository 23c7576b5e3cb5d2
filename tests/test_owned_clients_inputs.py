"""``fedlib.distributed.owned_clients`` refuses a rank outside ``0..world_size-1`` and a world size or
number of clients below 1 by name. Before, rank -1 silently returned the last rank's block (numpy
indexing from the end), rank 7 of 2 raised a bare ``IndexError``, a world size of 0 numpy's "number
sections must be larger than 0." and a float rank a ``TypeError`` about list indices."""
import numpy as np
import pytest

from fedlib.distributed import owned_clients


@pytest.mark.parametrize("args, message", [
    ((5, 2, -1), "rank must be an integer >= 0, got -1"),
    ((5, 2, 2), "rank must be in 0..1 (one of the 2 processes), got 2"),
    ((5, 2, 7), "rank must be in 0..1 (one of the 2 processes), got 7"),
    ((5, 2, 1.0), "rank must be an integer >= 0, got 1.0"),
    ((5, 0, 0), "world_size must be an integer >= 1, got 0"),
    ((0, 1, 0), "num_clients must be an integer >= 1, got 0"),
])
def test_owned_clients_refuses_bad_ranks_and_sizes(args, message):
    with pytest.raises(ValueError) as caught:
        owned_clients(*args)
    assert str(caught.value) == message


def test_owned_clients_blocks_unchanged():
    assert [owned_clients(5, 2, r).tolist() for r in range(2)] == [[0, 1, 2], [3, 4]]
    assert owned_clients(np.int64(5), np.int64(1), np.int64(0)).tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="world size: 6 processes but only 5 clients"):
        owned_clients(5, 6, 0)


@pytest.mark.parametrize("num_clients", [2 ** 70, 2 ** 63, 2 ** 62], ids=["2**70", "2**63", "2**62"])
def test_owned_clients_names_num_clients_too_large_for_an_index_array(num_clients):
    """Before: 2**70 and 2**62 clients were numpy's bare ValueError ('Maximum allowed size exceeded', 'array is too
    big; ...'), naming no argument, and 2**63 clients returned an empty float64 array (np.arange(2**63)). numpy's
    reason, where it gives one, follows in brackets."""
    with pytest.raises(ValueError) as caught:
        owned_clients(num_clients, 1, 0)
    assert str(caught.value).startswith(f"num_clients={num_clients} is too many: numpy cannot make an array of that "
                                        "many client indices")


@pytest.mark.parametrize("clients, message", [
    ([5], "client 5 is not one of the 4 clients given to init (indices 0..3)"),
    ([0, -1], "client -1 is not one of the 4 clients given to init (indices 0..3)"),
    ([0.5], "client must be an integer index, got 0.5"),
    ([True], "client must be an integer index, got True"),
])
def test_owns_refuses_clients_that_are_no_index(clients, message):
    """Before: Communicator.owns answered False for a client outside 0..num_clients-1 or a non-integer one
    (np.isin), on every rank, so such a client was owned by no rank, without a word."""
    from fedlib.distributed import LocalCommunicator

    with pytest.raises(ValueError) as caught:
        LocalCommunicator().owns(clients, 4)
    assert str(caught.value) == message


def test_owns_masks_unchanged():
    from fedlib.distributed import LocalCommunicator

    assert LocalCommunicator().owns([0, 3], 4).tolist() == [True, True]
    assert LocalCommunicator().owns(np.array([], dtype=np.int64), 4).tolist() == []
