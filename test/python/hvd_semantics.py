"""kolo.torch against horovod.torch's documented behaviour, one test per difference that
issue #35 found (run at np 2, 3 and 4 by CTest: python.np{2,3,4}.hvd-semantics).

Every test checks on each rank, then agrees across ranks (agree()) before it asserts, so a
check that fails on one rank fails the test on every rank at the same point: no rank is
left waiting in a later collective for one that gave up."""
import json
import os
import tempfile
import warnings

import pytest
import torch

import kolo.torch as hvd
from util import rank_data

HOROVOD_JOIN = os.environ.get("KOLO_JOIN_RULES", "horovod") == "horovod"


def agree(failures, what):
    """Collective: raises on every rank if any rank's `failures` (a list of texts) is not
    empty, naming the ranks and their first failure."""
    bad = hvd.allgather_object(failures[:3], name="agree." + what)
    wrong = {q: f for q, f in enumerate(bad) if f}
    assert not wrong, "%s failed on rank(s) %s: %s" % (what, sorted(wrong), wrong)


def check(failures, ok, text):
    if not ok:
        failures.append(text)


def close(a, b, tol=1e-6):
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=0, atol=tol)


# --- 1. what the build has -------------------------------------------------------------------

def test_built_queries_answer_for_this_build():
    assert hvd.ccl_built() is False and hvd.ddl_built() is False
    assert hvd.mpi_built() is True and hvd.rocm_built() is False
    assert hvd.gloo_built() in (True, False)
    assert hvd.mpi_enabled() is (os.environ.get("KOLO_BACKEND", "mpi") == "mpi")
    assert hvd.gloo_enabled() is (hvd.gloo_built() and not hvd.mpi_enabled())
    # nccl_built() is NCCL's version code (Horovod's tests compare it with 2700), 0 without it.
    v = hvd.nccl_built()
    assert isinstance(v, int) and not isinstance(v, bool)
    assert (v > 0) == hvd.cuda_built(), (v, hvd.cuda_built())
    assert v == 0 or v >= 2700
    assert hvd.is_homogeneous() in (True, False)


# --- 2. autograd: alltoall, reducescatter, grouped forms ---------------------------------------

def test_alltoall_gradient_returns_each_row_its_receivers_gradient(n, r):
    fails = []
    for dtype in (torch.float32, torch.float64):
        splits = [(r + j) % 3 + 1 for j in range(n)]          # rows rank r sends to rank j
        rows = sum(splits)
        x = torch.arange(rows * 2, dtype=dtype).reshape(rows, 2).requires_grad_()
        out, received = hvd.alltoall(x, splits=torch.tensor(splits, dtype=torch.int32), name="ag.a2a.%s" % dtype)
        want_recv = [(q + r) % 3 + 1 for q in range(n)]       # rows rank q sent to me
        check(fails, received.tolist() == want_recv, "received %s" % received.tolist())
        check(fails, not received.requires_grad, "received splits require grad")
        # The gradient of each output row: 100*me + its index; it travels back to the sender.
        (out * (100 * r + torch.arange(out.shape[0], dtype=dtype)).unsqueeze(1)).sum().backward()
        want = torch.empty(rows, 2, dtype=dtype)
        at = 0
        for j in range(n):
            start = sum((q + j) % 3 + 1 for q in range(r))    # my rows' place in rank j's output
            for k in range(splits[j]):
                want[at] = 100 * j + start + k
                at += 1
        check(fails, close(x.grad, want), "alltoall grad %s, want %s" % (x.grad.tolist(), want.tolist()))
    # Equal shares (no splits, output only) of first dimensions that differ per rank: the
    # gradient goes back by the rows each rank received, not by equal shares.
    y = torch.ones(n * (r + 1), 3, requires_grad=True)
    out = hvd.alltoall(y, name="ag.a2a.even")
    check(fails, out.shape[0] == n * (n + 1) // 2, "even alltoall rows %d" % out.shape[0])
    (out * 2).sum().backward()
    check(fails, close(y.grad, torch.full((n * (r + 1), 3), 2.0)), "even alltoall grad %s" % y.grad.tolist())
    agree(fails, "alltoall-grad")


@pytest.mark.parametrize("op,pre,post", [(hvd.Sum, 1.0, 1.0), (hvd.Average, 1.0, 1.0), (hvd.Sum, 0.5, 3.0)])
def test_reducescatter_gradient_is_the_allgather_of_output_gradients(n, r, op, pre, post):
    # Horovod's rule: grad = allgather(grad_out), times size for Sum, times prescale and postscale.
    fails = []
    x = rank_data(1, r, (2 * n + 1, 3), torch.float64).requires_grad_()
    out = hvd.reducescatter(x, op=op, name="ag.rs.%d.%g" % (op, pre), prescale_factor=pre, postscale_factor=post)
    (out * (r + 1)).sum().backward()
    factor = (n if op == hvd.Sum else 1) * pre * post
    rows = [2 + (q < 1) for q in range(n)]                    # 2n+1 rows: rank 0 gets one more
    want = torch.cat([torch.full((rows[q], 3), float(q + 1) * factor, dtype=torch.float64) for q in range(n)])
    check(fails, close(x.grad, want), "reducescatter grad %s, want %s" % (x.grad[:, 0].tolist(), want[:, 0].tolist()))
    agree(fails, "reducescatter-grad")


def test_grouped_collectives_are_differentiable_member_by_member(n, r):
    fails = []
    a = torch.full((3,), float(r + 1), requires_grad=True)
    b = torch.full((2, 2), 2.0 * (r + 1), requires_grad=True)
    sa, sb = hvd.grouped_allreduce([a, b], op=hvd.Sum, name="ag.gar")
    (sa.sum() * (r + 1) + sb.sum()).backward()
    # Sum's gradient: the sum of every rank's output gradient.
    check(fails, close(a.grad, torch.full((3,), n * (n + 1) / 2.0)), "grouped allreduce a %s" % a.grad.tolist())
    check(fails, close(b.grad, torch.full((2, 2), float(n))), "grouped allreduce b %s" % b.grad.tolist())

    c = torch.full((r + 1, 2), float(r), requires_grad=True)
    d = torch.full((2,), float(r), requires_grad=True)
    gc, gd = hvd.grouped_allgather([c, d], name="ag.gag")
    (gc.sum(1) * torch.arange(gc.shape[0], dtype=torch.float32)).sum().backward(retain_graph=True)
    (gd * (r + 1)).sum().backward()
    start = r * (r + 1) // 2                                 # rows before mine
    want_c = (start + torch.arange(r + 1, dtype=torch.float32)).unsqueeze(1).expand(r + 1, 2)
    # Every rank gives the same gradient to gc, so their average is it.
    check(fails, close(c.grad, want_c), "grouped allgather c %s" % c.grad.tolist())
    check(fails, close(d.grad, torch.full((2,), (n + 1) / 2.0)), "grouped allgather d %s" % d.grad.tolist())

    e = torch.ones(n, 2, requires_grad=True)
    f = torch.ones(2 * n, requires_grad=True)
    oe, of = hvd.grouped_reducescatter([e, f], op=hvd.Sum, name="ag.grs")
    (oe.sum() + of.sum() * (r + 1)).backward()
    check(fails, close(e.grad, torch.full((n, 2), float(n))), "grouped reducescatter e %s" % e.grad.tolist())
    want_f = torch.cat([torch.full((2,), float(n * (q + 1))) for q in range(n)])
    check(fails, close(f.grad, want_f), "grouped reducescatter f %s" % f.grad.tolist())
    agree(fails, "grouped-grad")


# --- 3. sparse ---------------------------------------------------------------------------------

def _sparse(seed, rank, rows=6, cols=3):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    dense = torch.randint(-3, 4, (rows, cols), generator=g).double()
    dense[torch.rand(rows, generator=g) < 0.5] = 0
    return dense.to_sparse()


@pytest.mark.parametrize("op", [hvd.Average, hvd.Sum])
def test_sparse_allreduce_equals_the_dense_allreduce(n, r, op):
    t = _sparse(7, r)
    wait = hvd.sparse_allreduce_async(t, name="sp.%d" % op, op=op)
    got = wait()
    fails = []
    check(fails, got.is_sparse, "result is not sparse")
    want = sum(_sparse(7, q).to_dense() for q in range(n)) / (n if op == hvd.Average else 1)
    check(fails, close(got.to_dense(), want), "sparse allreduce %s" % got.to_dense().tolist())
    agree(fails, "sparse-allreduce")


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_embedding_gradients_under_distributed_optimizer(n, r, sparse_as_dense):
    """nn.Embedding(sparse=True) + SparseAdam: two steps on every rank's ids equal SparseAdam
    on one process whose loss is the mean of the ranks' losses."""
    def model():
        torch.manual_seed(5)
        return torch.nn.Embedding(12, 3, sparse=True)

    def ids(step, q):
        return torch.tensor([(3 * q + step) % 12, (5 * q + 2 * step + 1) % 12, (q + 7) % 12])

    emb = model()
    opt = hvd.DistributedOptimizer(torch.optim.SparseAdam(list(emb.parameters()), lr=0.1),
                                   named_parameters=emb.named_parameters(), sparse_as_dense=sparse_as_dense)
    ref = model()
    ref_opt = torch.optim.SparseAdam(list(ref.parameters()), lr=0.1)
    for step in range(2):
        opt.zero_grad()
        (emb(ids(step, r)) ** 2).sum().backward()
        opt.step()
        ref_opt.zero_grad()
        (sum((ref(ids(step, q)) ** 2).sum() for q in range(n)) / n).backward()
        ref_opt.step()
    fails = []
    check(fails, close(emb.weight.detach(), ref.weight.detach(), 1e-5),
          "embedding differs by %g" % (emb.weight - ref.weight).abs().max().item())
    agree(fails, "sparse-optimizer")


# --- 4. allgather and broadcast gradients are averages -----------------------------------------

def test_allgather_and_broadcast_gradients_average_over_ranks(n, r):
    fails = []
    x = torch.full((r + 1, 2), 1.0, requires_grad=True)
    g = hvd.allgather(x, name="avg.gather")
    (g * (r + 1)).sum().backward()                             # rank q's output gradient: q+1
    check(fails, close(x.grad, torch.full((r + 1, 2), (n + 1) / 2.0)), "allgather grad %s" % x.grad.tolist())
    root = n - 1
    y = torch.ones(3, requires_grad=True)
    (hvd.broadcast(y, root, name="avg.bcast") * (r + 1)).sum().backward()
    want = torch.full((3,), (n + 1) / 2.0) if r == root else torch.zeros(3)
    check(fails, close(y.grad, want), "broadcast grad %s" % y.grad.tolist())
    agree(fails, "gather-broadcast-grad")


# --- 5. a name in flight is refused at the call ------------------------------------------------

@pytest.mark.parametrize("kind", ["allreduce", "allgather", "broadcast", "reducescatter"])
def test_a_name_in_flight_is_refused_at_the_call_with_value_error(n, r, kind):
    start = {
        "allreduce": lambda t, name: hvd.allreduce_async(t, name=name, op=hvd.Sum),
        "allgather": lambda t, name: hvd.allgather_async(t, name=name),
        "broadcast": lambda t, name: hvd.broadcast_async(t, 0, name=name),
        "reducescatter": lambda t, name: hvd.reducescatter_async(t, name=name, op=hvd.Sum),
    }[kind]
    fails = []
    for first in range(n):
        name = "dup.%s.%d" % (kind, first)
        t = torch.ones(2 * n, 2)
        h = None
        if r == first:
            # Nobody else has submitted it: it stays in flight until after the barrier.
            h = start(t, name)
            try:
                start(t, name)
                fails.append("the second %s of %s was not refused" % (kind, name))
            except ValueError as e:
                check(fails, isinstance(e, hvd.KoloError) and "submitted again" in str(e), "refusal: %r" % e)
        hvd.barrier()
        if r != first:
            h = start(t, name)
        out = hvd.synchronize(h)
        check(fails, out.shape[0] > 0, "%s completed empty" % name)
    agree(fails, "duplicate-" + kind)


# --- 6. alltoall argument errors ----------------------------------------------------------------

def test_alltoall_argument_errors_are_value_errors(n, r):
    fails = []
    for what, call in [
            ("uneven equal split", lambda: hvd.alltoall(torch.ones(n + 1), name="a2a.uneven")),
            ("splits beyond the rows", lambda: hvd.alltoall(torch.ones(n - 1), torch.ones(n, dtype=torch.int32),
                                                            name="a2a.beyond")),
            ("float splits", lambda: hvd.alltoall(torch.ones(n), torch.ones(n, dtype=torch.float32),
                                                  name="a2a.float")),
            ("float list splits", lambda: hvd.alltoall(torch.ones(n), [1.0] * n, name="a2a.floatlist"))]:
        try:
            call()
            fails.append("%s: no error" % what)
        except ValueError:
            pass
        except Exception as e:  # noqa: BLE001 -- the wrong type is the failure
            fails.append("%s: %s, not a ValueError" % (what, type(e).__name__))
    # Ranks that disagree (dtype) fail with RuntimeError (KoloError), as Horovod's do.
    try:
        hvd.alltoall(torch.ones(n, dtype=torch.float32 if r % 2 else torch.float64), name="a2a.dtype")
        check(fails, n == 1, "dtype mismatch: no error")
    except RuntimeError:
        pass
    # The job goes on.
    check(fails, torch.equal(hvd.alltoall(torch.full((n,), float(r)), name="a2a.after"),
                             torch.arange(n, dtype=torch.float32)), "alltoall after the errors")
    agree(fails, "alltoall-errors")


# --- 7. join (Horovod's rules; kolo's with KOLO_JOIN_RULES=kolo: test_join.py) -----------------

@pytest.mark.skipif(not HOROVOD_JOIN, reason="KOLO_JOIN_RULES=kolo: test_join.py covers kolo's rules")
def test_join_average_divides_by_every_rank_and_gather_broadcast_raise(n, r):
    fails = []
    for joined in range(n):
        if r == joined:
            last = hvd.join()
        else:
            avg = hvd.allreduce(torch.ones(4), name="hj.avg.%d" % joined)
            check(fails, close(avg, torch.full((4,), (n - 1) / n)), "average %s with rank %d joined" % (avg, joined))
            iavg = hvd.allreduce(torch.full((3,), 7, dtype=torch.int64), name="hj.iavg.%d" % joined)
            check(fails, torch.equal(iavg, torch.full((3,), 7 * (n - 1) // n, dtype=torch.int64)), "int average %s" % iavg)
            for what, call in [("allgather", lambda: hvd.allgather(torch.ones(1, 2), name="hj.ag.%d" % joined)),
                               ("broadcast", lambda: hvd.broadcast(torch.ones(2), 1 if joined == 0 else 0,
                                                                   name="hj.bc.%d" % joined))]:
                if n == 1:
                    continue
                try:
                    call()
                    fails.append("%s with rank %d joined: no error" % (what, joined))
                except RuntimeError as e:
                    check(fails, "joined" in str(e), "%s: %s" % (what, e))
            last = hvd.join()
        check(fails, last != joined or n == 1, "join returned the first rank to join (%d)" % last)
        lasts = hvd.allgather_object(last, name="hj.last.%d" % joined)
        check(fails, lasts == [last] * n, "join returned %s" % lasts)
    agree(fails, "join-horovod")


# --- 8. the warning of step() after synchronize() ----------------------------------------------

def test_step_after_synchronize_without_skip_warns_with_horovods_words(n, r):
    model = torch.nn.Linear(2, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    model(torch.ones(1, 2)).sum().backward()
    opt.synchronize()
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        opt.step()
    fails = []
    texts = [str(w.message) for w in ws]
    check(fails, n == 1 or any("optimizer.step() called without optimizer.skip_synchronize()" in t for t in texts),
          "warnings: %s" % texts)
    agree(fails, "step-warning")


# --- 9. broadcast_optimizer_state leaves zero gradients ----------------------------------------

def test_broadcast_optimizer_state_leaves_zero_grads_as_horovods_dummy_step(n, r):
    torch.manual_seed(3)
    frozen = torch.nn.Parameter(torch.ones(2), requires_grad=False)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(list(model.parameters()) + [frozen], lr=0.1, momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=list(model.named_parameters()) + [("frozen", frozen)])
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    fails = []
    for name, p in model.named_parameters():
        check(fails, p.grad is not None and torch.equal(p.grad, torch.zeros_like(p)), "%s.grad %r" % (name, p.grad))
    check(fails, frozen.grad is None, "a frozen parameter got a gradient")
    agree(fails, "optimizer-state-grads")


# --- 10. start_timeline / stop_timeline ---------------------------------------------------------

def test_timeline_starts_and_stops_at_run_time(n, r):
    fails = []
    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, "tl%d.json" % i) for i in range(2)]
        for i, path in enumerate(paths):
            path = hvd.broadcast_object(path, 0, name="tl.path.%d" % i)  # rank 0's folder
            hvd.start_timeline(path, mark_cycles=(i == 0))
            hvd.allreduce(torch.ones(3), name="tl.tensor.%d" % i)
            hvd.stop_timeline()
            if r == 0:
                with open(path) as f:
                    events = json.load(f)
                names = json.dumps(events)
                check(fails, "tl.tensor.%d" % i in names, "tensor %d not in timeline %d" % (i, i))
                check(fails, "tl.tensor.%d" % (1 - i) not in names, "timeline %d holds the other tensor" % i)
            hvd.barrier()  # rank 0 read it before the folder goes
    hvd.allreduce(torch.ones(1), name="tl.after")  # nothing is written after stop_timeline
    agree(fails, "timeline")
