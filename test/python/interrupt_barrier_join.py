# Ctrl-C (SIGINT) while kolo.barrier() or kolo.join() waits for a peer that has not come yet:
# the call must raise KeyboardInterrupt within a moment, and the runtime must stay usable: the
# interrupted barrier / join stays submitted, the next barrier() of the same name (join())
# waits on it again, and both complete once the peer arrives; an allreduce afterwards is
# exact. Rank 1 comes 5 s late each time and prints nothing; rank 0 prints one line per
# check: INTERRUPT-OK (x2) and RESUMED-OK (x3).
import ctypes
import os
import signal
import threading
import time

from kolo import _kolo as k

k.init()


def interrupted(what, call):
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    t0 = time.time()
    try:
        call()
        print("rank 0: %s returned before the peer came -WRONG" % what, flush=True)
    except KeyboardInterrupt:
        took = time.time() - t0
        print("rank 0: %s: KeyboardInterrupt after %.2f s%s" % (what, took, " INTERRUPT-OK" if took < 2.5 else ""),
              flush=True)


if k.rank() == 0:
    interrupted("barrier", lambda: k.barrier("late"))
    k.barrier("late")  # the same barrier: completes when rank 1 arrives
    print("rank 0: barrier resumed and completed RESUMED-OK", flush=True)
    interrupted("join", k.join)
    last = k.join()  # the same join
    print("rank 0: join resumed, last rank %d%s" % (last, " RESUMED-OK" if last == 1 else " -WRONG"), flush=True)
else:
    time.sleep(5)
    k.barrier("late")
    time.sleep(5)
    k.join()
buf = (ctypes.c_float * 4)(1, 2, 3, 4)
k.allreduce_async(ctypes.addressof(buf), k.DTYPE_FLOAT32, [4], "after", k.OP_SUM).wait()
if k.rank() == 0:
    ok = list(buf) == [2.0, 4.0, 6.0, 8.0]
    print("rank 0: allreduce after: %s%s" % (list(buf), " RESUMED-OK" if ok else " -WRONG"), flush=True)
k.shutdown()
