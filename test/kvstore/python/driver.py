"""Runs the kolo.torch KVStore tests on every rank of `mpirun -np N`:
    KOLO_NUM_SERVERS=s mpirun -np N python3 driver.py TYPE
Every rank creates one store of TYPE. Server ranks (the last s) serve inside create() and
exit there, as an MXNet server does; workers run test_kvstore.py under pytest with that
store (fixture `kv`), then close it. A worker whose tests fail exits at once with status 1,
without closing, so mpirun ends the job instead of the others waiting for it."""
import os
import sys

import pytest
import torch

import kolo.torch as hvd

torch.set_num_threads(1)


class StorePlugin:
    """Hands the job's one store to the tests."""

    def __init__(self, kv):
        self.store = kv

    @pytest.fixture
    def kv(self):
        return self.store


def main():
    kind = sys.argv[1]
    kv = hvd.KVStore.create(kind)  # servers never return from here
    here = os.path.dirname(os.path.abspath(__file__))
    rc = pytest.main(["-q", "-x", "--color=no", "-p", "no:cacheprovider", os.path.join(here, "test_kvstore.py")],
                     plugins=[StorePlugin(kv)])
    if rc != 0:
        print("rank %d: KVStore tests failed (%s)" % (hvd.rank(), rc), file=sys.stderr, flush=True)
        os._exit(1)
    kv.close()
    hvd.shutdown()


if __name__ == "__main__":
    main()
