"""Blocking calls without a name use one name per kind, "<kind>.noname.blocking" (so kolo's
response cache knows it from the second call on), while async calls without a name still
count: ranks making the same sequence of calls agree, whichever mix of the two they make."""
import pytest
import torch

import kolo.torch as hvd
from util import run_in_threads


def test_blocking_calls_between_counted_async_calls(n, r):
    x = torch.full((5,), float(r + 1))
    h1 = hvd.allreduce_async(x, op=hvd.Sum)
    total = float(n * (n + 1) // 2)
    for _ in range(3):
        assert torch.equal(hvd.allreduce(x, op=hvd.Sum), torch.full((5,), total))
        y = x.clone()
        hvd.allreduce_(y, op=hvd.Max)
        assert torch.equal(y, torch.full((5,), float(n)))
        b = torch.full((2,), float(r))
        hvd.broadcast_(b, n - 1)
        assert torch.equal(b, torch.full((2,), float(n - 1)))
        assert torch.equal(hvd.allgather(torch.tensor([r])), torch.arange(n))
        outs = hvd.grouped_allreduce([x, x * 2], op=hvd.Sum)
        assert torch.equal(outs[1], torch.full((5,), 2 * total))
    h2 = hvd.allreduce_async(x * 3, op=hvd.Sum)
    assert torch.equal(hvd.synchronize(h2), torch.full((5,), 3 * total))
    assert torch.equal(hvd.synchronize(h1), torch.full((5,), total))


@pytest.mark.skipif(hvd.size() < 2, reason="ranks must disagree: needs two or more")
def test_failed_blocking_call_names_its_name_and_frees_it(n, r):
    t = torch.zeros(4 + (r == 1))
    with pytest.raises(hvd.KoloError) as e:
        hvd.allreduce_(t)
    msg = str(e.value)
    assert 'allreduce "allreduce.noname.blocking"' in msg and "[5] on rank 1" in msg, msg
    ok = torch.ones(3)
    hvd.allreduce_(ok, op=hvd.Sum)
    assert torch.equal(ok, torch.full((3,), float(n)))


def test_blocking_calls_from_several_threads_take_turns(n, r):
    # Every call reduces the same values (they depend on the rank only), so any pairing of
    # threads and calls across ranks is right; without the turns, a second thread would submit
    # the shared name while it is in flight and fail at once.
    calls = 8

    def work(t, errors):
        for c in range(calls):
            x = torch.full((6,), float(r + 1))
            hvd.allreduce_(x, op=hvd.Sum)
            if not torch.equal(x, torch.full((6,), float(n * (n + 1) // 2))):
                errors.append("thread %d call %d: %s" % (t, c, x.tolist()))

    assert run_in_threads(work, 3) == []
