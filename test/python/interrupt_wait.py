# Ctrl-C (SIGINT) while a Python thread waits on a collective that never completes: the wait
# must raise KeyboardInterrupt within a moment (kolo's binding checks Python's signals while
# it waits), with Handle.wait(), Handle.wait_for(30), and the result readers that wait
# first: copy_output (allgather) and received_splits (alltoall). Rank 1 never submits the
# names, then leaves; rank 0 prints INTERRUPT-OK for each wait ended by the interrupt in time.
import ctypes
import os
import signal
import threading
import time

from kolo import _kolo as k

k.init()
buf = (ctypes.c_float * 4)(1, 2, 3, 4)
if k.rank() == 0:
    out = (ctypes.c_float * 8)()
    waits = {
        "wait": lambda h: h.wait(),
        "wait_for": lambda h: h.wait_for(30.0),
        "copy_output": lambda h: h.copy_output(-1, ctypes.addressof(out), ctypes.sizeof(out)),
        "received_splits": lambda h: h.received_splits(),
    }
    for how, wait in waits.items():
        p = ctypes.addressof(buf)
        if how == "copy_output":
            h = k.allgather_async(p, k.DTYPE_FLOAT32, [4], "interrupt." + how)
        elif how == "received_splits":
            h = k.alltoall_async(p, k.DTYPE_FLOAT32, [4], None, "interrupt." + how)
        else:
            h = k.allreduce_async(p, k.DTYPE_FLOAT32, [4], "interrupt." + how, k.OP_SUM)
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.time()
        try:
            wait(h)
            print("rank 0: %s returned" % how, flush=True)
        except KeyboardInterrupt:
            took = time.time() - t0
            print("rank 0: %s: KeyboardInterrupt after %.2f s%s" % (how, took, " INTERRUPT-OK" if took < 2.5 else ""),
                  flush=True)
else:
    time.sleep(8)
os._exit(0)  # no shutdown: the names are still pending on rank 0
