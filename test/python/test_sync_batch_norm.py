"""hvd.SyncBatchNorm against torch's BatchNorm run by one process on the concatenated batch:
outputs, input gradients, summed weight gradients and running statistics must agree, with
uneven (and empty) per-rank batches, 2-d and 4-d inputs."""
import pytest
import torch

import kolo.torch as hvd


def batch(r, rows, shape, seed):
    g = torch.Generator().manual_seed(seed * 100 + r)
    # An offset and a scale far from 0/1, so the statistics matter and rounding shows.
    return torch.randn((rows,) + shape, generator=g, dtype=torch.float64) * 3.0 + 5.0


def rows_of(q, uneven):
    return (q + 1) * 2 if not uneven else [3, 0, 5, 1][q % 4]


@pytest.mark.parametrize("shape,uneven", [((4,), False), ((3, 2, 5), False), ((4,), True)])
def test_matches_batch_norm_on_the_global_batch(shape, uneven):
    n, r = hvd.size(), hvd.rank()
    c = shape[0]
    xs = [batch(q, rows_of(q, uneven), shape, 7) for q in range(n)]
    cs = [batch(q, rows_of(q, uneven), shape, 8) for q in range(n)]  # loss weights
    ref = torch.nn.BatchNorm1d(c) if len(shape) == 1 else torch.nn.BatchNorm2d(c)
    sync = hvd.SyncBatchNorm(c)
    for m in (ref, sync):
        m.double()
        with torch.no_grad():
            m.weight.copy_(torch.linspace(0.5, 2.0, c, dtype=torch.float64))
            m.bias.copy_(torch.linspace(-1.0, 1.0, c, dtype=torch.float64))

    for step in range(2):  # running statistics after two steps
        full = torch.cat(xs).requires_grad_()
        y_ref = ref(full)
        (y_ref * torch.cat(cs)).sum().backward()
        mine = xs[r].clone().requires_grad_()
        y = sync(mine)
        (y * cs[r]).sum().backward()
        lo = sum(rows_of(q, uneven) for q in range(r))
        hi = lo + rows_of(r, uneven)
        torch.testing.assert_close(y, y_ref[lo:hi], rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(mine.grad, full.grad[lo:hi], rtol=1e-9, atol=1e-9)
        # Weight and bias gradients are local sums; over the ranks they are the global one.
        gw = hvd.allreduce(sync.weight.grad, op=hvd.Sum, name="sbn.gw.%s.%d" % (shape, step))
        gb = hvd.allreduce(sync.bias.grad, op=hvd.Sum, name="sbn.gb.%s.%d" % (shape, step))
        torch.testing.assert_close(gw, ref.weight.grad, rtol=1e-9, atol=1e-9)
        torch.testing.assert_close(gb, ref.bias.grad, rtol=1e-9, atol=1e-9)
        for m in (ref, sync):
            m.weight.grad = None
            m.bias.grad = None
    torch.testing.assert_close(sync.running_mean, ref.running_mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(sync.running_var, ref.running_var, rtol=1e-12, atol=1e-12)
    assert int(sync.num_batches_tracked) == 2

    # Eval mode is local (no collective: ranks may call it any number of times).
    sync.eval()
    ref.eval()
    if r == 0:
        torch.testing.assert_close(sync(xs[0]), ref(xs[0]))


def test_in_a_model_with_distributed_optimizer_ranks_stay_identical():
    n, r = hvd.size(), hvd.rank()
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), hvd.SyncBatchNorm(3), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 2))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    g = torch.Generator().manual_seed(r)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4 + r, 2, 6, 6, generator=g)).pow(2).mean().backward()
        opt.step()
    state = torch.cat([t.detach().flatten().double() for t in model.state_dict().values()])
    everyone = hvd.allgather(state.view(1, -1), name="sbn.model.state")
    for q in range(n):
        assert torch.equal(everyone[q], everyone[0]), "rank %d's model differs from rank 0's" % q


def test_bad_input_is_refused_before_any_collective():
    layer = hvd.SyncBatchNorm(3)
    with pytest.raises(ValueError, match="has 4 channels, the layer 3"):
        layer(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="expected an input of shape"):
        layer(torch.zeros(3))
