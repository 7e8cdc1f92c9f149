"""DistributedOptimizer: N ranks with batch b each equal one process with batch N*b on the
same data (the reference is computed locally on every rank, no second launch)."""
import pytest
import torch

import kolo.torch as hvd
from models import loss_fn, make_batch, make_model

B = 6       # per-rank batch
STEPS = 5


def reference(make_opt, steps=STEPS, passes=1, clip=None):
    """One process, batch size()*passes*B per step."""
    model = make_model(seed=3)
    opt = make_opt(model.parameters())
    for s in range(steps):
        x, y = make_batch(1000 + s, hvd.size() * passes * B)
        opt.zero_grad()
        loss_fn(model, x, y).backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
    return model


def distributed(make_opt, steps=STEPS, passes=1, clip=None, **kw):
    model = make_model(seed=3)
    opt = hvd.DistributedOptimizer(make_opt(model.parameters()), named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes, **kw)
    for s in range(steps):
        x, y = make_batch(1000 + s, hvd.size() * passes * B)
        opt.zero_grad()
        for k in range(passes):
            chunk = hvd.rank() * passes + k
            xs, ys = x[chunk * B:(chunk + 1) * B], y[chunk * B:(chunk + 1) * B]
            (loss_fn(model, xs, ys) / passes).backward()
        if hvd.size() > 1:
            # Every gradient's allreduce was started by its hook during backward.
            assert all(opt._sync.submitted(i) for i in opt._index.values())
        if clip:
            opt.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            with opt.skip_synchronize():
                opt.step()
        else:
            opt.step()
    return model, opt


def assert_same(model, ref, rtol, atol):
    for (n, a), (_, b) in zip(model.state_dict().items(), ref.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol, msg=lambda m: "%s: %s" % (n, m))


SGD = lambda ps: torch.optim.SGD(ps, lr=0.2, momentum=0.9)  # noqa: E731
ADAM = lambda ps: torch.optim.Adam(ps, lr=0.01)  # noqa: E731


@pytest.mark.parametrize("make_opt", [SGD, ADAM], ids=["sgd-momentum", "adam"])
def test_equivalent_to_one_process_with_whole_batch(make_opt):
    model, opt = distributed(make_opt)
    assert isinstance(opt, type(make_opt([torch.zeros(1, requires_grad=True)])))
    # float32; the tolerance: 1e-5 relative (1e-6 absolute for entries near zero).
    assert_same(model, reference(make_opt), rtol=1e-5, atol=1e-6)


def test_backward_passes_per_step_2():
    model, _ = distributed(SGD, passes=2)
    assert_same(model, reference(SGD, passes=2), rtol=1e-5, atol=1e-6)


def test_fp16_compression():
    model, _ = distributed(SGD, compression=hvd.Compression.fp16)
    # Gradients travel as float16 (11-bit mantissa): 1e-3 relative, 1e-4 absolute.
    assert_same(model, reference(SGD), rtol=1e-3, atol=1e-4)


def test_synchronize_then_clip_then_step():
    model, _ = distributed(SGD, clip=0.5)
    assert_same(model, reference(SGD, clip=0.5), rtol=1e-5, atol=1e-6)


def test_op_sum_and_predivide():
    # Sum of per-rank mean gradients = size() * the whole-batch mean: lr/size() matches.
    n = hvd.size()
    model, _ = distributed(lambda ps: torch.optim.SGD(ps, lr=0.2 / n), op=hvd.Sum)
    assert_same(model, reference(lambda ps: torch.optim.SGD(ps, lr=0.2)), rtol=1e-5, atol=1e-6)
    model, _ = distributed(SGD, gradient_predivide_factor=2.0)
    assert_same(model, reference(SGD), rtol=1e-5, atol=1e-6)


def test_unused_parameter_is_reduced_in_step():
    model = make_model(seed=3)
    extra = torch.nn.Linear(2, 2)  # never used in forward: no hook fires for it
    params = list(model.named_parameters()) + [("extra." + n, p) for n, p in extra.named_parameters()]
    opt = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in params], lr=0.1), named_parameters=params)
    x, y = make_batch(5, B)
    loss_fn(model, x, y).backward()
    opt.step()  # must not hang: the unused parameters are reduced (as zeros) here
    assert torch.equal(extra.weight.grad, torch.zeros(2, 2))


def test_misuse_raises():
    if hvd.size() == 1:
        pytest.skip("hooks are registered with more than one rank only")
    model = make_model(seed=3)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    x, y = make_batch(6, B)
    loss_fn(model, x, y).backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    with pytest.raises(AssertionError, match="more than backward_passes_per_step"):
        loss_fn(model, x, y).backward()
    opt.synchronize()
    with pytest.raises(ValueError, match="not unique"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[("a", p) for p in model.parameters()])
