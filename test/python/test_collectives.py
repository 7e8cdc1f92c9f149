"""kolo.torch collectives against exact expectations, per dtype and reduce op."""
import pytest
import torch

import kolo.torch as hvd
from util import rank_data

DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]
OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max, "Product": hvd.Product}
SHAPES = [(), (1,), (17,), (3, 5, 2)]


def inputs(seed, shape, dtype, op):
    lo, hi = (1, 3) if op == "Product" else ((0, 6) if dtype == torch.uint8 else (-5, 6))
    return [rank_data(seed, q, shape, dtype, lo, hi) for q in range(hvd.size())]


def expected(xs, op, dtype):
    s = torch.stack([x.to(torch.float64) for x in xs])
    if op == "Sum":
        out = s.sum(0)
    elif op == "Average":
        out = s.sum(0) / len(xs)
        if not dtype.is_floating_point:
            out = torch.trunc(out)
    elif op == "Min":
        out = s.min(0).values
    elif op == "Max":
        out = s.max(0).values
    else:
        out = s.prod(0)
    return out


def check(got, want, dtype):
    assert got.dtype == dtype
    got = got.to(torch.float64)
    if dtype in (torch.float16, torch.bfloat16) or (dtype.is_floating_point and hvd.size() == 3):
        # Sums of small integers are exact; an average over 3 ranks rounds once.
        torch.testing.assert_close(got, want, rtol=1e-2 if dtype == torch.bfloat16 else 1e-3, atol=0)
    else:
        assert torch.equal(got, want), "got %s want %s" % (got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_allreduce_out_of_place(dtype, op):
    for i, shape in enumerate(SHAPES):
        xs = inputs(10 + i, shape, dtype, op)
        mine = xs[hvd.rank()].clone()
        got = hvd.allreduce(mine, op=OPS[op], name="oop.%s.%s.%d" % (dtype, op, i))
        check(got, expected(xs, op, dtype), dtype)
        assert torch.equal(mine, xs[hvd.rank()]), "out-of-place allreduce changed its input"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_allreduce_in_place(dtype, op):
    xs = inputs(20, (4, 9), dtype, op)
    t = xs[hvd.rank()].clone()
    ret = hvd.allreduce_(t, op=OPS[op], name="ip.%s.%s" % (dtype, op))
    assert ret is t
    check(t, expected(xs, op, dtype), dtype)


def test_allreduce_default_is_average_and_average_flag():
    xs = inputs(30, (8,), torch.float64, "Average")
    got = hvd.allreduce(xs[hvd.rank()])
    check(got, expected(xs, "Average", torch.float64), torch.float64)
    got = hvd.allreduce(xs[hvd.rank()], average=False)
    check(got, expected(xs, "Sum", torch.float64), torch.float64)


def test_allreduce_scale_factors():
    xs = inputs(31, (6,), torch.float64, "Sum")
    got = hvd.allreduce(xs[hvd.rank()], op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0)
    torch.testing.assert_close(got, expected(xs, "Sum", torch.float64) * 2.0, rtol=0, atol=0)
    got = hvd.allreduce(xs[hvd.rank()], op=hvd.Average, postscale_factor=3.0)
    torch.testing.assert_close(got, expected(xs, "Average", torch.float64) * 3.0, rtol=1e-12, atol=0)


def test_allreduce_non_contiguous_in_place():
    xs = inputs(32, (5, 4), torch.float32, "Sum")
    base = xs[hvd.rank()].clone().t()  # a transposed view: not contiguous
    assert not base.is_contiguous()
    hvd.allreduce_(base, op=hvd.Sum)
    check(base, expected(xs, "Sum", torch.float32).t(), torch.float32)


def test_async_and_synchronize():
    handles, want = [], []
    for i in range(20):
        xs = inputs(40 + i, (i + 1,), torch.float32, "Sum")
        t = xs[hvd.rank()].clone()
        h = hvd.allreduce_async_(t, op=hvd.Sum, name="async.%d" % i)
        handles.append((h, t))
        want.append(expected(xs, "Sum", torch.float32))
    xs = inputs(60, (3,), torch.int64, "Max")
    h_oop = hvd.allreduce_async(xs[hvd.rank()], op=hvd.Max)
    for (h, t), w in zip(handles, want):
        out = hvd.synchronize(h)
        assert out is t
        check(t, w, torch.float32)
    check(hvd.synchronize(h_oop), expected(xs, "Max", torch.int64), torch.int64)
    with pytest.raises(ValueError, match="unknown or already synchronized handle"):
        hvd.synchronize(h_oop)


def test_poll_reaches_true():
    t = torch.ones(4)
    h = hvd.allreduce_async_(t, op=hvd.Sum, name="poll")
    import time
    deadline = time.time() + 30
    while not hvd.poll(h):
        assert time.time() < deadline, "poll never became true"
        time.sleep(0.001)
    hvd.synchronize(h)
    assert torch.equal(t, torch.full((4,), float(hvd.size())))


def test_automatic_names_pair_up_in_call_order():
    # Unnamed calls of every kind, interleaved and outstanding together: ranks agree on
    # allreduce.noname.<n>, broadcast.noname.<n>, ... because they count calls alike.
    xs = inputs(70, (7,), torch.float32, "Sum")
    h1 = hvd.allreduce_async(xs[hvd.rank()], op=hvd.Sum)
    b = torch.full((3,), float(hvd.rank()))
    h2 = hvd.broadcast_async_(b, hvd.size() - 1)
    h3 = hvd.allgather_async(torch.tensor([hvd.rank()]))
    h4 = hvd.allreduce_async(xs[hvd.rank()] * 2, op=hvd.Sum)
    check(hvd.synchronize(h4), expected(xs, "Sum", torch.float32) * 2, torch.float32)
    assert torch.equal(hvd.synchronize(h3), torch.arange(hvd.size()))
    hvd.synchronize(h2)
    assert torch.equal(b, torch.full((3,), float(hvd.size() - 1)))
    check(hvd.synchronize(h1), expected(xs, "Sum", torch.float32), torch.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allgather(dtype):
    # Rank q contributes q+1 rows: the first dimension differs per rank.
    xs = [rank_data(80, q, (q + 1, 3), dtype, 0, 6) for q in range(hvd.size())]
    got = hvd.allgather(xs[hvd.rank()], name="ag.%s" % dtype)
    assert got.dtype == dtype
    assert torch.equal(got, torch.cat(xs))
    h = hvd.allgather_async(xs[hvd.rank()][0], name="ag.async.%s" % dtype)  # 1-d
    assert torch.equal(hvd.synchronize(h), torch.cat([x[0] for x in xs]))


def test_allgather_scalar_and_empty():
    got = hvd.allgather(torch.tensor(float(hvd.rank())))
    assert torch.equal(got, torch.arange(hvd.size(), dtype=torch.float32))
    rows = 0 if hvd.rank() == 0 else 2
    got = hvd.allgather(torch.full((rows, 2), hvd.rank(), dtype=torch.int32))
    assert got.shape == (2 * (hvd.size() - 1), 2)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast(dtype):
    for root in range(hvd.size()):
        xs = [rank_data(90 + root, q, (2, 7), dtype, 0, 6) for q in range(hvd.size())]
        mine = xs[hvd.rank()].clone()
        got = hvd.broadcast(mine, root, name="bc.%s.%d" % (dtype, root))
        assert torch.equal(got, xs[root])
        assert torch.equal(mine, xs[hvd.rank()])
        ret = hvd.broadcast_(mine, root, name="bc_.%s.%d" % (dtype, root))
        assert ret is mine and torch.equal(mine, xs[root])


def test_broadcast_async_forms():
    t = torch.full((5,), float(hvd.rank()))
    h1 = hvd.broadcast_async(t, 0)
    h2 = hvd.broadcast_async_(t, hvd.size() - 1)
    assert torch.equal(hvd.synchronize(h1), torch.zeros(5))
    hvd.synchronize(h2)
    assert torch.equal(t, torch.full((5,), float(hvd.size() - 1)))


def test_allreduce_autograd():
    x = torch.full((3,), float(hvd.rank() + 1), requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum)
    (y * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    # d/dx_r of sum_q x_q weighted, summed over ranks' losses: size() * weights.
    assert torch.equal(x.grad, torch.tensor([1.0, 2.0, 3.0]) * hvd.size())


def test_barrier_and_topology():
    hvd.barrier()
    assert 0 <= hvd.rank() < hvd.size()
    assert 0 <= hvd.local_rank() < hvd.local_size() <= hvd.size()
    assert 0 <= hvd.cross_rank() < hvd.cross_size()
    assert hvd.is_initialized()
    sizes = hvd.allgather_object((hvd.size(), hvd.local_size(), hvd.cross_size()))
    assert len(set(sizes)) == 1


def test_unsupported_inputs_fail_locally():
    with pytest.raises(TypeError, match="dtype torch.complex64 is not supported"):
        hvd.allreduce(torch.zeros(2, dtype=torch.complex64))
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.allreduce(torch.zeros(2), op=hvd.Adasum)
    with pytest.raises(ValueError, match="unknown op"):
        hvd.allreduce(torch.zeros(2), op=17)


@pytest.mark.parametrize("op,logical", [("Sum", "any"), ("Max", "any"), ("Product", "all"), ("Min", "all")])
def test_bool_allreduce_is_logical(op, logical):
    # torch.distributed's rule: sum/max = OR, product/min = AND. Element i on rank r is bit r of i.
    n, r = hvd.size(), hvd.rank()
    i = torch.arange(2 ** n * 3)
    mine = ((i % 2 ** n) >> r & 1).bool()
    pattern = i % 2 ** n
    want = pattern != 0 if logical == "any" else pattern == 2 ** n - 1
    got = hvd.allreduce(mine, op=OPS[op], name="bool.%s" % op)
    assert got.dtype == torch.bool and torch.equal(got, want)


def test_bool_average_is_refused_and_bool_buffers_broadcast():
    with pytest.raises(Exception, match="average of bool tensors is not defined"):
        hvd.allreduce(torch.ones(3, dtype=torch.bool), name="bool.avg")  # the default op is Average
    # A model whose state holds bool and int8 buffers (masks, quantised weights) broadcasts whole.
    m = torch.nn.Linear(3, 2)
    m.register_buffer("mask", torch.tensor([hvd.rank() == 0, False, True]))
    m.register_buffer("q", torch.full((4,), hvd.rank() - 3, dtype=torch.int8))
    hvd.broadcast_parameters(m.state_dict(), root_rank=0)
    assert torch.equal(m.mask, torch.tensor([True, False, True]))
    assert torch.equal(m.q, torch.full((4,), -3, dtype=torch.int8))
    flags = hvd.allgather(torch.tensor([hvd.rank() % 2 == 1]), name="bool.gather")
    assert flags.tolist() == [q % 2 == 1 for q in range(hvd.size())]
