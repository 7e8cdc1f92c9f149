"""Ranks that disagree about a collective get KoloError with kolo's message on every rank,
and the job goes on (the next collective works)."""
import pytest
import torch

import kolo.torch as hvd

pytestmark = pytest.mark.skipif(hvd.size() < 2, reason="ranks must disagree: needs two or more")


def still_works(tag):
    t = torch.ones(3)
    hvd.allreduce_(t, op=hvd.Sum, name="after." + tag)
    assert torch.equal(t, torch.full((3,), float(hvd.size())))


def test_shape_mismatch():
    t = torch.zeros(4 + (hvd.rank() == 1))
    with pytest.raises(hvd.KoloError) as e:
        hvd.allreduce(t, name="mm.shape")
    msg = str(e.value)
    assert 'allreduce "mm.shape"' in msg and "[5] on rank 1" in msg and "[4] on rank" in msg, msg
    assert isinstance(e.value, hvd.HorovodInternalError) and isinstance(e.value, RuntimeError)
    still_works("shape")


def test_dtype_mismatch():
    t = torch.zeros(4, dtype=torch.float64 if hvd.rank() == 0 else torch.float32)
    with pytest.raises(hvd.KoloError, match=r'"mm\.dtype".*float64.*rank 0|"mm\.dtype".*float32.*float64'):
        hvd.allreduce_(t, name="mm.dtype")
    still_works("dtype")


def test_op_mismatch():
    op = hvd.Max if hvd.rank() == 0 else hvd.Sum
    with pytest.raises(hvd.KoloError, match=r'"mm\.op"'):
        hvd.allreduce(torch.zeros(2), op=op, name="mm.op")
    still_works("op")


def test_root_mismatch():
    root = 0 if hvd.rank() == 0 else 1
    with pytest.raises(hvd.KoloError, match=r'broadcast "mm\.root".*root'):
        hvd.broadcast_(torch.zeros(2), root, name="mm.root")
    still_works("root")


def test_allgather_trailing_dims_mismatch():
    with pytest.raises(hvd.KoloError, match=r'allgather "mm\.gather"'):
        hvd.allgather(torch.zeros(2, 3 + hvd.rank()), name="mm.gather")
    still_works("gather")


def test_async_error_surfaces_in_synchronize():
    h = hvd.allreduce_async(torch.zeros(1 + hvd.rank()), name="mm.async")
    with pytest.raises(hvd.KoloError, match=r'"mm\.async"'):
        hvd.synchronize(h)
    still_works("async")


def test_bad_root_fails_locally():
    with pytest.raises(hvd.KoloError, match="root"):
        hvd.broadcast(torch.zeros(2), hvd.size() + 3, name="mm.badroot")
    still_works("badroot")
