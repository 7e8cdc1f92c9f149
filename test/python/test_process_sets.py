"""Process sets in kolo.torch (hvd.ProcessSet, add/remove_process_set, init(process_sets=),
process_set= on every op), against exact values. Every rank runs every test; each rank
works on the set of ranks of its parity (at np 2: two single-rank sets)."""
import pytest
import torch

import kolo.torch as hvd
from util import rank_data


@pytest.fixture
def sets():
    """The even and odd ranks as registered sets; this rank's set first."""
    even = hvd.add_process_set(hvd.ProcessSet(range(0, hvd.size(), 2)))
    odd = hvd.add_process_set([r for r in range(hvd.size()) if r % 2 == 1])
    mine, other = (even, odd) if hvd.rank() % 2 == 0 else (odd, even)
    yield mine, other
    hvd.barrier()
    assert hvd.remove_process_set(even)
    assert hvd.remove_process_set(odd)


def test_process_set_attributes(sets):
    mine, other = sets
    assert mine.included() and not other.included()
    assert mine.ranks == [r for r in range(hvd.size()) if r % 2 == hvd.rank() % 2]
    assert mine.rank() == mine.ranks.index(hvd.rank()) and other.rank() == -1
    assert mine.size() == len(mine.ranks)
    assert hvd.global_process_set.size() == hvd.size()
    assert hvd.global_process_set.process_set_id == 0


def test_collectives_on_a_set(sets):
    mine, _ = sets
    m = mine.ranks
    ins = {q: rank_data(300, q, (2 * len(m) + 1, 3), torch.float32) for q in m}
    total = torch.stack([ins[q] for q in m]).sum(0)
    x = ins[hvd.rank()]
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum, name="ps.ar", process_set=mine), total)
    assert torch.equal(hvd.allreduce(x, name="ps.avg", process_set=mine), total / len(m))
    y = x.clone()
    hvd.allreduce_(y, op=hvd.Sum, name="ps.ar_", process_set=mine)
    assert torch.equal(y, total)
    root = m[-1]  # a job rank
    assert torch.equal(hvd.broadcast(x, root, name="ps.bc", process_set=mine), ins[root])
    assert torch.equal(hvd.allgather(x, name="ps.ag", process_set=mine), torch.cat([ins[q] for q in m]))
    rows = [total.shape[0] // len(m) + (1 if k < total.shape[0] % len(m) else 0) for k in range(len(m))]
    k = mine.rank()
    got = hvd.reducescatter(x, op=hvd.Sum, name="ps.rs", process_set=mine)
    assert torch.equal(got, total[sum(rows[:k]):sum(rows[:k + 1])])
    out, received = hvd.alltoall(torch.full((len(m),), float(hvd.rank())), splits=[1] * len(m), name="ps.a2a",
                                 process_set=mine)
    assert out.tolist() == [float(q) for q in m] and received.tolist() == [1] * len(m)
    g = hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum, name="ps.grp", process_set=mine)
    assert torch.equal(g[0], total) and torch.equal(g[1], 2 * total)
    assert hvd.allgather_object(hvd.rank(), name="ps.obj", process_set=mine) == m
    assert hvd.broadcast_object({"r": hvd.rank()}, root_rank=root, name="ps.bobj", process_set=mine) == {"r": root}
    hvd.barrier(process_set=mine)


def test_gradients_flow_within_the_set(sets):
    mine, _ = sets
    x = torch.ones(4, requires_grad=True)
    hvd.allreduce(x, op=hvd.Sum, name="ps.grad", process_set=mine).sum().backward()
    assert torch.equal(x.grad, torch.full((4,), float(mine.size())))


def test_outsider_and_unregistered_sets_are_refused(sets):
    _, other = sets
    with pytest.raises(hvd.KoloError, match="is not in process set %d" % other.process_set_id):
        hvd.allreduce(torch.ones(3), name="ps.outsider", process_set=other)
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(torch.ones(3), name="ps.unregistered", process_set=hvd.ProcessSet([0]))
    with pytest.raises(hvd.KoloError, match="the ranks differ"):
        hvd.add_process_set([0] if hvd.rank() == 0 else list(range(hvd.size())))


def test_init_registers_process_sets_and_optimizer_averages_within_the_set():
    ps = hvd.ProcessSet([hvd.size() - 1, 0])
    hvd.init(process_sets=[ps])  # kolo is running already: this registers the set
    assert ps.process_set_id > 0 and ps.ranks == sorted({0, hvd.size() - 1})
    if ps.included():
        w = torch.nn.Parameter(torch.zeros(3))
        opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=1.0), named_parameters=[("ps.w", w)],
                                       process_set=ps)
        (w * float(hvd.rank() + 1)).sum().backward()
        opt.step()
        mean = sum(r + 1 for r in ps.ranks) / len(ps.ranks)
        assert torch.allclose(w.detach(), torch.full((3,), -mean))
    hvd.barrier()
    assert hvd.remove_process_set(ps)
    assert not hvd.remove_process_set(ps)
