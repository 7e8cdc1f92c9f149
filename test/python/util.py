"""Helpers shared by the kolo.torch tests."""
import torch


def rank_data(seed, rank, shape, dtype, low=-5, high=6):
    """Integers in [low, high) as `dtype`: exact in every dtype kolo reduces."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randint(low, high, shape, generator=g, dtype=torch.int64).to(dtype)


def run_in_threads(work, threads, timeout=120):
    """Runs work(t) on `threads` threads at once; returns the errors they report (work
    appends to the list it gets as its second argument; an exception is reported too)."""
    import threading
    errors = []

    def guarded(t):
        try:
            work(t, errors)
        except Exception as e:  # noqa: BLE001 - reported to the caller, on the main thread
            errors.append("thread %d: %r" % (t, e))

    ts = [threading.Thread(target=guarded, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=timeout)
    assert not any(t.is_alive() for t in ts), "a thread is still waiting"
    return errors
