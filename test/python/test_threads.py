"""kolo.torch from several Python threads at once (session 8 audit, docs/correctness.md):
threads with names of their own get exact results step after step (the names repeat, so on
one host the shared-memory board carries them after the first step); a name submitted again
while in flight is refused at once on that rank, and the first submission goes on."""
import threading

import torch

import kolo.torch as hvd


def test_threads_with_their_own_names_get_exact_results(n, r):
    threads, steps = 4, 15
    errors = []

    def work(t):
        try:
            for s in range(steps):
                x = torch.arange(7 + t, dtype=torch.float32) + float(r * 10 + s)
                h1 = hvd.allreduce_async(x, op=hvd.Sum, name="thr.%d.a" % t)
                y = torch.full((3,), float(r + t), dtype=torch.float64)
                h2 = hvd.allreduce_async(y, op=hvd.Max, name="thr.%d.b" % t)
                want = torch.arange(7 + t, dtype=torch.float32) * n + float(sum(q * 10 + s for q in range(n)))
                got = hvd.synchronize(h1)
                if not torch.equal(got, want):
                    errors.append("thread %d step %d: %s != %s" % (t, s, got.tolist(), want.tolist()))
                if hvd.synchronize(h2).tolist() != [float(n - 1 + t)] * 3:
                    errors.append("thread %d step %d: max wrong" % (t, s))
        except Exception as e:  # noqa: BLE001 - reported below, on the main thread
            errors.append("thread %d: %r" % (t, e))

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ts), "a thread is still waiting"
    assert errors == []


def test_duplicate_in_flight_is_refused_on_its_rank_and_the_first_goes_on(n, r):
    for step in range(3):  # the name is cached after the first round (the board on one host)
        x = torch.full((5,), float(r + 1))
        if r == 0:
            # The peers submit only after the barrier: the first is certainly in flight.
            first = hvd.allreduce_async(x, op=hvd.Sum, name="thr.dup")
            # Refused at the call, as Horovod does: a ValueError (KoloValueError).
            refusal = None
            try:
                hvd.allreduce_async(torch.zeros(5), op=hvd.Sum, name="thr.dup")
            except ValueError as e:
                refusal = e
            hvd.barrier()  # before asserting: the peers must not wait for rank 0 in vain
            assert isinstance(refusal, hvd.KoloError) and "submitted again on rank 0" in str(refusal), refusal
        else:
            hvd.barrier()
            first = hvd.allreduce_async(x, op=hvd.Sum, name="thr.dup")
        assert hvd.synchronize(first).tolist() == [float(n * (n + 1) // 2)] * 5
