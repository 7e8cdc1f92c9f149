"""alltoall, reducescatter and the grouped collectives of kolo.torch, against exact values."""
import pytest
import torch

import kolo.torch as hvd
from util import rank_data


def splits_of(q, n):
    return [(q + j) % 3 for j in range(n)]  # uneven, zeros included


def test_alltoall_with_splits():
    n, r = hvd.size(), hvd.rank()
    ins = [rank_data(200, q, (sum(splits_of(q, n)), 3), torch.float32) for q in range(n)]
    out, received = hvd.alltoall(ins[r], splits=splits_of(r, n), name="a2a.splits")
    want = []
    for q in range(n):
        start = sum(splits_of(q, n)[:r])
        want.append(ins[q][start:start + splits_of(q, n)[r]])
    assert torch.equal(out, torch.cat(want))
    assert received.tolist() == [splits_of(q, n)[r] for q in range(n)]


def test_alltoall_even_and_async():
    n, r = hvd.size(), hvd.rank()
    ins = [rank_data(201, q, (2 * n, 2), torch.int64) for q in range(n)]
    h = hvd.alltoall_async(ins[r])
    out = hvd.synchronize(h)
    assert torch.equal(out, torch.cat([ins[q][2 * r:2 * r + 2] for q in range(n)]))


def test_alltoall_into_output():
    n, r = hvd.size(), hvd.rank()
    ins = [rank_data(204, q, (sum(splits_of(q, n)), 3), torch.float32) for q in range(n)]
    want = torch.cat([ins[q][sum(splits_of(q, n)[:r]):][:splits_of(q, n)[r]] for q in range(n)])
    rows = want.shape[0]
    out = torch.full((rows + 2, 3), 7.0)  # room to spare: the last rows stay as they were
    got, received = hvd.alltoall(ins[r], splits=splits_of(r, n), name="a2a.out", output=out)
    assert got.data_ptr() == out.data_ptr() and torch.equal(got, want)
    assert torch.equal(out[rows:], torch.full((2, 3), 7.0))
    assert received.tolist() == [splits_of(q, n)[r] for q in range(n)]
    # Reused across calls, even split, async; and a non-contiguous output (written back).
    even = [rank_data(205, q, (2 * n, 3), torch.float32) for q in range(n)]
    want = torch.cat([even[q][2 * r:2 * r + 2] for q in range(n)])
    out = torch.zeros(2 * n, 3)
    for _ in range(3):
        out.fill_(0)
        assert torch.equal(hvd.synchronize(hvd.alltoall_async(even[r], output=out)), want)
    wide = torch.zeros(3, 2 * n + 4)
    got = hvd.alltoall(even[r], name="a2a.out.strided", output=wide.t())
    assert torch.equal(got, want) and torch.equal(wide.t()[:2 * n], want)


def test_alltoall_into_output_errors_on_the_rank_at_fault():
    n, r = hvd.size(), hvd.rank()
    ins = [rank_data(206, q, (2 * n, 3), torch.float32) for q in range(n)]
    want = torch.cat([ins[q][2 * r:2 * r + 2] for q in range(n)])
    for bad in range(n):
        if r == bad:
            with pytest.raises(hvd.KoloError, match=r'alltoall "a2a.small.%d": output float32\[%d,3\] has room for'
                               % (bad, 2 * n - 1)):
                hvd.alltoall(ins[r], name="a2a.small.%d" % bad, output=torch.zeros(2 * n - 1, 3))
            with pytest.raises(hvd.KoloError, match=r'"a2a.dtype.%d": output .*another dtype' % bad):
                hvd.alltoall(ins[r], name="a2a.dtype.%d" % bad, output=torch.zeros(2 * n, 3, dtype=torch.float64))
        else:
            assert torch.equal(hvd.alltoall(ins[r], name="a2a.small.%d" % bad, output=torch.zeros(2 * n, 3)), want)
            assert torch.equal(hvd.alltoall(ins[r], name="a2a.dtype.%d" % bad, output=torch.zeros(2 * n, 3)), want)
        assert torch.equal(hvd.alltoall(ins[r], name="a2a.after.%d" % bad, output=torch.zeros(2 * n, 3)), want)


def test_a_refusal_on_one_rank_fails_the_collective_on_every_rank():
    # An empty splits list and a bad broadcast root, on one rank at a time: that rank's call
    # raises its own reason, its peers' calls (valid on their own) raise it too, naming the
    # rank, instead of waiting for it. The names work again afterwards.
    n, r = hvd.size(), hvd.rank()
    x = torch.ones(2 * n, 3)
    for bad in range(n):
        name = "a2a.refused.%d" % bad
        with pytest.raises(hvd.KoloError, match="splits is empty") as e:
            hvd.alltoall(x, splits=[] if r == bad else [2] * n, name=name)
        assert (r == bad) != ("refused on rank %d when submitted" % bad in str(e.value))
        out, _ = hvd.alltoall(x, splits=[2] * n, name=name)
        assert torch.equal(out, x)
        name = "bcast.refused.%d" % bad
        with pytest.raises(hvd.KoloError, match="root %d is not a rank" % n):
            hvd.broadcast(x, root_rank=n if r == bad else 0, name=name)
        assert torch.equal(hvd.broadcast(torch.full((2,), float(r)), root_rank=bad, name=name), torch.full((2,), float(bad)))


def test_reducescatter_uneven_rows():
    n, r = hvd.size(), hvd.rank()
    dim0 = 2 * n + 1
    ins = [rank_data(202, q, (dim0, 3), torch.float64) for q in range(n)]
    total = torch.stack(ins).sum(0)
    rows = [dim0 // n + (1 if q < dim0 % n else 0) for q in range(n)]
    start = sum(rows[:r])
    got = hvd.reducescatter(ins[r], op=hvd.Sum, name="rs.sum")
    assert torch.equal(got, total[start:start + rows[r]])
    got = hvd.reducescatter(ins[r])  # Average by default, as Horovod
    torch.testing.assert_close(got, total[start:start + rows[r]] / n, rtol=1e-12, atol=0)


def test_grouped_allreduce_in_and_out_of_place():
    n, r = hvd.size(), hvd.rank()
    shapes = [(3,), (2, 5), (7,)]
    dtypes = [torch.float32, torch.float32, torch.int64]
    ins = [[rank_data(203 + i, q, s, d) for i, (s, d) in enumerate(zip(shapes, dtypes))] for q in range(n)]
    want = [torch.stack([ins[q][i] for q in range(n)]).sum(0) for i in range(len(shapes))]
    mine = [t.clone() for t in ins[r]]
    outs = hvd.grouped_allreduce(mine, op=hvd.Sum, name="ga")
    for o, w, m, i in zip(outs, want, mine, ins[r]):
        assert torch.equal(o, w) and torch.equal(m, i)
    ret = hvd.grouped_allreduce_(mine, op=hvd.Sum)
    for o, w, m in zip(ret, want, mine):
        assert o is m and torch.equal(m, w)


def test_grouped_allgather_and_reducescatter():
    n, r = hvd.size(), hvd.rank()
    a = [rank_data(210, q, (q + 1, 2), torch.int32, 0, 6) for q in range(n)]
    b = [rank_data(211, q, (1,), torch.float32) for q in range(n)]
    ga, gb = hvd.grouped_allgather([a[r], b[r]], name="gag")
    assert torch.equal(ga, torch.cat(a)) and torch.equal(gb, torch.cat(b))
    x = [rank_data(212, q, (n, 2), torch.float32) for q in range(n)]
    (rs,) = hvd.grouped_reducescatter([x[r]], op=hvd.Sum, name="grs")
    assert torch.equal(rs, torch.stack(x).sum(0)[r:r + 1])
