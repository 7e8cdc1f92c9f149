"""Small models and data for the kolo.torch optimizer tests (same on every rank for a seed)."""
import torch


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(4 * 6 * 6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def make_batch(seed, n):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


def loss_fn(model, x, y):
    return torch.nn.functional.cross_entropy(model(x), y)
