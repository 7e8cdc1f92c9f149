"""broadcast_parameters, broadcast_optimizer_state, broadcast_object, allgather_object:
every rank ends equal to the root (whose values each rank recomputes locally)."""
import pytest
import torch

import kolo.torch as hvd
from models import make_batch, make_model, loss_fn


@pytest.mark.parametrize("root", [0, -1])
@pytest.mark.parametrize("form", ["state_dict", "named_parameters", "parameters"])
def test_broadcast_parameters(root, form):
    root = root % hvd.size()
    model = make_model(seed=100 + hvd.rank())
    if hvd.rank() != root:
        model[0].weight.data.mul_(-3)  # make sure nothing is equal by chance
    params = {"state_dict": lambda: model.state_dict(),
              "named_parameters": lambda: model.named_parameters(),
              "parameters": lambda: list(model.parameters())}[form]()
    hvd.broadcast_parameters(params, root_rank=root)
    want = make_model(seed=100 + root)
    for (n, a), (_, b) in zip(model.state_dict().items(), want.state_dict().items()):
        assert torch.equal(a, b), n


def test_broadcast_parameters_buffers():
    bn = torch.nn.BatchNorm1d(5)
    bn.running_mean.fill_(hvd.rank())
    bn.num_batches_tracked.fill_(10 + hvd.rank())
    hvd.broadcast_parameters(bn.state_dict(), root_rank=0)
    assert torch.equal(bn.running_mean, torch.zeros(5))
    assert bn.num_batches_tracked.item() == 10


def train_steps(model, opt, steps, seed):
    for s in range(steps):
        x, y = make_batch(seed + s, 4)
        opt.zero_grad()
        loss_fn(model, x, y).backward()
        opt.step()


OPTIMIZERS = {
    "sgd-momentum": lambda ps, r: torch.optim.SGD(ps, lr=0.1 + r, momentum=0.9, nesterov=r % 2 == 0),
    "adam": lambda ps, r: torch.optim.Adam(ps, lr=0.01 * (r + 1), betas=(0.8 + 0.01 * r, 0.99)),
    "adamw": lambda ps, r: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1 * r),
}


@pytest.mark.parametrize("kind", list(OPTIMIZERS))
@pytest.mark.parametrize("root_only_stepped", [False, True])
def test_broadcast_optimizer_state(kind, root_only_stepped):
    root = hvd.size() - 1

    def run(r):
        model = make_model(seed=7)
        opt = OPTIMIZERS[kind](model.parameters(), r)
        steps = 0 if (root_only_stepped and r != root) else r + 1
        train_steps(model, opt, steps, seed=50 + r)
        return model, opt

    model, opt = run(hvd.rank())
    hvd.broadcast_optimizer_state(opt, root_rank=root)
    _, want = run(root)
    got, ref = opt.state_dict(), want.state_dict()
    assert got["param_groups"] == ref["param_groups"]
    assert sorted(got["state"]) == sorted(ref["state"]) and len(ref["state"]) > 0
    for pid, st in ref["state"].items():
        assert sorted(got["state"][pid]) == sorted(st)
        for k, v in st.items():
            g = got["state"][pid][k]
            if torch.is_tensor(v):
                assert torch.equal(g, v), (pid, k)
            else:
                assert g == v, (pid, k)


@pytest.mark.parametrize("root", [0, -1])
def test_broadcast_object(root):
    root = root % hvd.size()
    obj = {"rank": hvd.rank(), "list": list(range(hvd.rank() + 3)), "t": torch.ones(2) * hvd.rank()}
    got = hvd.broadcast_object(obj if hvd.rank() == root else None, root_rank=root)
    assert got["rank"] == root and got["list"] == list(range(root + 3))
    assert torch.equal(got["t"], torch.ones(2) * root)
    assert hvd.broadcast_object("named", 0, name="bo.named") == "named"


def test_allgather_object():
    got = hvd.allgather_object({"r": hvd.rank(), "pad": "x" * (100 * hvd.rank())})
    assert got == [{"r": q, "pad": "x" * (100 * q)} for q in range(hvd.size())]
