"""Helpers shared by the kolo.torch tests."""
import torch


def rank_data(seed, rank, shape, dtype, low=-5, high=6):
    """Integers in [low, high) as `dtype`: exact in every dtype kolo reduces."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randint(low, high, shape, generator=g, dtype=torch.int64).to(dtype)
