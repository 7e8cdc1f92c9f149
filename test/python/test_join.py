"""hvd.join() under kolo's rules (KOLO_JOIN_RULES=kolo; CTest python.np{2,3,4}.join-kolo-rules):
ranks that run out of data at different steps (Horovod's uneven-data API). Rank r runs out
after its own number of steps; until every rank has joined, a joined rank takes part with
nothing of its own, so each step's result counts only the ranks still running (an average
divides by them). Horovod's rules (kolo.torch's default): hvd_semantics.py."""
import os

import pytest
import torch

import kolo.torch as hvd
from models import loss_fn, make_batch, make_model

B = 4  # per-rank batch
kolo_rules = pytest.mark.skipif(os.environ.get("KOLO_JOIN_RULES") != "kolo",
                                reason="kolo's join rules need KOLO_JOIN_RULES=kolo")


@kolo_rules
def test_allreduce_counts_only_ranks_still_running_and_join_returns_last(n, r):
    steps = r + 1  # rank r runs r+1 steps; rank n-1 joins last
    for s in range(steps):
        x = torch.full((5, 3), float(r + 1))
        total = hvd.allreduce(x, op=hvd.Sum, name="join.sum.%d" % s)
        mean = hvd.allreduce(x, op=hvd.Average, name="join.avg.%d" % s)
        running = [q for q in range(n) if q + 1 > s]  # ranks with a step s
        want = float(sum(q + 1 for q in running))
        assert torch.equal(total, torch.full((5, 3), want)), (s, total[0, 0].item(), want)
        torch.testing.assert_close(mean, torch.full((5, 3), want / len(running)), rtol=0, atol=1e-6)
        gathered = hvd.allgather(torch.full((1, 2), float(r)), name="join.gather.%d" % s)
        assert gathered[:, 0].tolist() == [float(q) for q in running]
    assert hvd.join() == n - 1
    # Out of the joined state again: an ordinary collective over every rank.
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum, name="join.after").tolist() == [float(n)] * 2


def test_join_again_next_epoch(n, r):
    # Everyone joins at once: the last one is some rank, the same on every rank.
    last = hvd.join()
    assert 0 <= last < n
    every = hvd.allgather(torch.tensor([last]), name="join.again.last")
    assert every.tolist() == [last] * n


@kolo_rules
def test_distributed_optimizer_with_uneven_batches(n, r):
    """Rank r trains 2 + r steps, then joins. Step s averages the gradients of the ranks
    still running, i.e. equals one process training on their chunks of the batch."""
    steps = [2 + q for q in range(n)]
    model = make_model(seed=7)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters())
    for s in range(steps[r]):
        x, y = make_batch(500 + s, n * B)
        opt.zero_grad()
        loss_fn(model, x[r * B:(r + 1) * B], y[r * B:(r + 1) * B]).backward()
        opt.step()
    assert hvd.join() == n - 1

    ref = make_model(seed=7)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for s in range(steps[r]):
        x, y = make_batch(500 + s, n * B)
        idx = torch.cat([torch.arange(q * B, (q + 1) * B) for q in range(n) if steps[q] > s])
        ref_opt.zero_grad()
        loss_fn(ref, x[idx], y[idx]).backward()
        ref_opt.step()
    for (name, a), (_, b) in zip(model.state_dict().items(), ref.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=lambda m: "%s: %s" % (name, m))


def test_join_device_must_be_an_int():
    with pytest.raises(TypeError, match="device must be an int"):
        hvd.join(device="cpu")
