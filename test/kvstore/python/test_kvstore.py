"""kolo.torch.KVStore on torch tensors (run by driver.py: every worker runs these tests in
the same order against one store, fixture `kv`, whose servers are the job's last ranks).
Each test uses keys of its own and sets its own optimizer; the autouse barrier keeps a fast
worker from starting the next test (and its set_optimizer) while another still pushes."""
import pytest
import torch
import torch.nn.functional as F

import kolo.torch as hvd
from kolo.torch.kvstore import SGD, Adam


@pytest.fixture(autouse=True)
def in_step(kv):
    kv.barrier()
    yield
    kv.barrier()


def small_model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 3))


def batch(step, rows):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(rows, 6, generator=g)
    return x, torch.randint(0, 3, (rows,), generator=g)


def test_sync_equals_one_worker_with_global_batch(kv):
    """n workers with batch b through the store == one worker with batch n*b (torch's SGD)."""
    if kv.type == "dist_async":
        pytest.skip("dist_async applies each worker's push on its own")
    n, r, b, steps = kv.num_workers, kv.rank, 4, 5
    model = small_model()
    with torch.no_grad():  # the store keeps worker 0's values: make the others differ
        for p in model.parameters():
            p.add_(float(r))
    keys = ["sync." + name for name, _ in model.named_parameters()]
    params = list(model.parameters())
    kv.init(keys, [p.data for p in params])
    kv.set_optimizer(SGD(learning_rate=0.1, momentum=0.9, wd=1e-3, rescale_grad=1.0 / n))
    kv.pull(keys, out=[p.data for p in params])
    for step in range(steps):
        x, y = batch(step, n * b)
        model.zero_grad()
        F.cross_entropy(model(x[r * b:(r + 1) * b]), y[r * b:(r + 1) * b]).backward()
        kv.push(keys, [p.grad for p in params])
        kv.pull(keys, out=[p.data for p in params])

    ref = small_model()
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    for step in range(steps):
        x, y = batch(step, n * b)
        opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        opt.step()
    for (name, p), q in zip(ref.named_parameters(), params):
        assert torch.allclose(p, q, atol=1e-5, rtol=0), "%s differs by %g" % (name, (p - q).abs().max())


def test_cosine_schedule_runs_on_the_servers(kv):
    """CosineScheduler: each update of a key moves it by the scheduled rate (MXNet's formula,
    by update count u; in dist_async every worker's push is an update)."""
    import math
    from kolo.torch.kvstore import CosineScheduler
    n = kv.num_workers
    sched = CosineScheduler(max_update=6, final_lr=0.1, warmup_steps=2, warmup_begin_lr=0.2)
    kv.init("sched", torch.zeros(3))
    kv.set_optimizer(SGD(learning_rate=1.0, rescale_grad=1.0 / n, lr_scheduler=sched))
    rates = [0.6, 1.0, 0.1 + 0.45 * (1 + math.cos(math.pi / 4)), 0.55, 0.1 + 0.45 * (1 - math.cos(math.pi / 4)),
             0.1, 0.1]
    w = torch.zeros(3)
    for _ in range(len(rates)):
        kv.push("sched", torch.ones(3))
        kv.barrier()  # every worker's push of this round applied (dist_async: one update each)
        kv.pull("sched", out=w)
        kv.barrier()
    per_round = [rates[i] for i in range(len(rates))] if kv.type != "dist_async" else \
        [sum(rates[min(u, len(rates) - 1)] for u in range(k * n, k * n + n)) / n for k in range(len(rates))]
    assert torch.allclose(w, torch.full((3,), -sum(per_round)), atol=1e-5), (w, per_round)
    with pytest.raises(TypeError, match="CosineScheduler"):
        SGD(lr_scheduler="cosine")


def test_async_trains(kv):
    """dist_async (and the others): a regression toward a teacher model; the loss falls."""
    r = kv.rank
    model, teacher = small_model(), torch.nn.Linear(6, 3)
    keys = ["train." + name for name, _ in model.named_parameters()]
    params = list(model.parameters())
    kv.init(keys, [p.data for p in params])
    kv.set_optimizer(SGD(learning_rate=0.05, momentum=0.5, rescale_grad=1.0 / kv.num_workers))
    kv.pull(keys, out=[p.data for p in params])
    x_eval, _ = batch(999, 64)
    with torch.no_grad():
        target = teacher(x_eval)
        first = F.mse_loss(model(x_eval), target).item()
    for step in range(60):
        x, _ = batch(10 * step + r, 16)
        with torch.no_grad():
            y = teacher(x)
        model.zero_grad()
        F.mse_loss(model(x), y).backward()
        kv.pushpull(keys, [p.grad for p in params], out=[p.data for p in params])
    kv.barrier()
    kv.pull(keys, out=[p.data for p in params])
    with torch.no_grad():
        last = F.mse_loss(model(x_eval), target).item()
    assert last < 0.3 * first, "loss %g -> %g" % (first, last)


def test_lookahead_pulls_weights_plus_momentum(kv):
    """dist_async with lookahead: after n*P equal pushes, a pull returns w + momentum*mom
    (exact binary fractions); the other types refuse the option."""
    opt = SGD(learning_rate=0.5, momentum=0.5, lookahead=True)
    if kv.type != "dist_async":
        with pytest.raises(hvd.KoloError, match="lookahead is for dist_async"):
            kv.set_optimizer(opt)
        return
    kv.init("la.w", torch.zeros(4))
    kv.set_optimizer(opt)
    for _ in range(3):
        kv.push("la.w", torch.ones(4))
    kv.barrier()
    out = torch.empty(4)
    kv.pull("la.w", out=out)
    w = mom = 0.0
    for _ in range(3 * kv.num_workers):
        mom = 0.5 * mom - 0.5
        w += mom
    assert torch.equal(out, torch.full((4,), w + 0.5 * mom)), (out, w, mom)


def test_every_push_applied_exactly_once(kv):
    """Worker r pushes -(r+1) P times into w -= g: the result is P*n(n+1)/2 exactly (keys of
    40 elements are split across the servers by KOLO_KVSTORE_BIGARRAY_BOUND=16)."""
    n, r, pushes = kv.num_workers, kv.rank, 100
    kv.init(["count.a", "count.b"], [torch.zeros(40), torch.zeros(5, 2)])
    kv.set_optimizer(SGD(learning_rate=1.0))
    for _ in range(pushes):
        kv.push(["count.a", "count.b"], [torch.full((40,), -(r + 1.0)), torch.full((5, 2), -(r + 1.0))])
    kv.barrier()  # every push has returned, so it is applied
    a, b = torch.empty(40), torch.empty(5, 2)
    kv.pull(["count.a", "count.b"], out=[a, b])
    expected = pushes * n * (n + 1) / 2
    assert torch.equal(a, torch.full((40,), expected)), a
    assert torch.equal(b, torch.full((5, 2), expected)), b


def test_values_of_one_key_are_summed_and_outs_all_filled(kv):
    kv.init("sum.w", torch.zeros(3))
    kv.set_optimizer(SGD(learning_rate=1.0))
    kv.push("sum.w", [torch.ones(3), torch.full((3,), 2.0)])  # w -= 3 per worker
    kv.barrier()
    outs = [torch.empty(3), torch.empty(6)[::2]]  # the second is not contiguous
    kv.pull("sum.w", out=outs)
    for o in outs:
        assert torch.equal(o, torch.full((3,), -3.0 * kv.num_workers))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_values_have_float32_master_weights(kv, dtype):
    """The store keeps float32 (MXNet's multi_precision): 64 rounds of +1/32 move 256 to 258
    exactly; a 16-bit weight would never move (256 + 1/32 is 256 in float16, spacing 0.25,
    and in bfloat16, spacing 2)."""
    n, key = kv.num_workers, "half.%s" % str(dtype).split(".")[-1]
    kv.init(key, torch.full((3,), 256.0, dtype=dtype))
    kv.set_optimizer(SGD(learning_rate=2.0, rescale_grad=1.0 / n))
    for _ in range(64):
        kv.push(key, torch.full((3,), -1.0 / 64, dtype=dtype))
    kv.barrier()
    out = torch.empty(3, dtype=dtype)
    kv.pull(key, out=out)
    assert torch.equal(out, torch.full((3,), 258.0, dtype=dtype)), out
    with pytest.raises(hvd.KoloError, match=r"dtype float32 but init gave"):
        kv.push(key, torch.zeros(3))


def test_errors_name_the_key_and_the_cause(kv):
    kv.init("err.w", torch.zeros(3, 2))
    with pytest.raises(hvd.KoloError, match=r"push key 'err.w' \(id \d+\): shape \[4\] but init gave \[3,2\]"):
        kv.push("err.w", torch.zeros(4))
    with pytest.raises(hvd.KoloError, match=r"key 'err.w' .*dtype float64, but the store holds float32"):
        kv.push("err.w", torch.zeros(3, 2, dtype=torch.float64))
    with pytest.raises(hvd.KoloError, match=r"pull key 'err.w' .*shape \[2,3\] but init gave \[3,2\]"):
        kv.pull("err.w", out=torch.zeros(2, 3))
    with pytest.raises(hvd.KoloError, match=r"key 'err.nope' .*not initialised"):
        kv.push("err.nope", torch.zeros(1))
    with pytest.raises(hvd.KoloError, match=r"key 'err.w' .*already initialised"):
        kv.init("err.w", torch.zeros(3, 2))
    with pytest.raises(TypeError, match="mixes int keys"):
        kv.push(3, torch.zeros(3, 2))
    with pytest.raises(ValueError, match="out= is required"):
        kv.pull("err.w")
    # The store still works after the refused calls.
    kv.pushpull("err.w", torch.zeros(3, 2))


def test_optimizer_state_save_and_load(kv, tmp_path):
    """Keys a and b see the same gradients; b then takes two more steps. After loading the
    state saved before those, a and b move by the same amount on the next push: b's Adam
    moments are back where they were saved."""
    path = str(tmp_path / "kv_state")  # only worker 0's path is used
    kv.init(["st.a", "st.b"], [torch.zeros(7), torch.zeros(7)])
    kv.set_optimizer(Adam(learning_rate=0.1))

    def grad(step):
        return torch.randn(7, generator=torch.Generator().manual_seed(step))

    def pull():
        kv.barrier()
        a, b = torch.empty(7), torch.empty(7)
        kv.pull(["st.a", "st.b"], out=[a, b])
        return a, b

    for step in range(3):  # a barrier per step: in dist_async both keys see the same order
        kv.push(["st.a", "st.b"], [grad(step), grad(step)])
        kv.barrier()
    kv.save_optimizer_states(path)
    for step in range(3, 5):
        kv.push("st.b", grad(step))
        kv.barrier()
    a0, b0 = pull()
    kv.load_optimizer_states(path)
    kv.push(["st.a", "st.b"], [grad(9), grad(9)])
    a1, b1 = pull()
    assert torch.allclose(a1 - a0, b1 - b0, atol=1e-6), (a1 - a0, b1 - b0)


def test_local_store_in_process(kv):
    """The "local" type on each worker on its own: int keys, a Python updater, pushpull."""
    local = hvd.KVStore.create("local")
    local.init([3, 4], [torch.ones(2, 2), torch.zeros(3)])
    seen = []

    def updater(key, grad, weight):
        seen.append((key, tuple(weight.shape)))
        weight.add_(grad, alpha=2.0)

    local.set_updater(updater)
    out = torch.empty(2, 2)
    local.pushpull(3, [torch.ones(2, 2), torch.ones(2, 2)], out=out)
    assert torch.equal(out, torch.full((2, 2), 5.0))
    assert seen == [(3, (2, 2))]
    with pytest.raises(TypeError, match="mixes str keys"):
        local.push("x", torch.ones(3))

    def broken(key, grad, weight):
        raise RuntimeError("updater broke")

    local.set_updater(broken)
    with pytest.raises(hvd.KoloError, match="updater raised for key 4: RuntimeError: updater broke"):
        local.push(4, torch.ones(3))
    local.close()
