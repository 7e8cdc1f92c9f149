"""kolo.torch — Horovod's PyTorch API on kolo.

A script written for horovod.torch runs on kolo with one changed line:

    import kolo.torch as hvd

    hvd.init()
    torch.set_num_threads(...)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

Launch with `mpirun -np N python3 train.py`. See docs/pytorch.md for what is supported and
where kolo differs from Horovod.
"""
from kolo.torch.compression import Compression
from kolo.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                  broadcast_parameters)
from kolo.torch.mpi_ops import (Adasum, Average, HorovodInternalError, KoloError, KoloValueError, Max, Min,
                                Product, Sum, allgather, allgather_async, allreduce, allreduce_,
                                allreduce_async, allreduce_async_, barrier, broadcast, broadcast_,
                                broadcast_async, broadcast_async_, ccl_built, cross_rank, cross_size,
                                cuda_built, ddl_built, gloo_built, gloo_enabled, init, is_homogeneous,
                                is_initialized, join, local_rank, local_size, mpi_built, mpi_enabled,
                                mpi_threads_supported, nccl_built, poll, rank, rocm_built, shutdown, size,
                                sparse_allreduce_async, start_timeline, stop_timeline, synchronize)
from kolo.torch import kvstore
from kolo.torch.kvstore import KVStore
from kolo.torch.optimizer import DistributedOptimizer
from kolo.torch.sync_batch_norm import SyncBatchNorm
from kolo.torch.process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from kolo.torch.scatter_ops import (alltoall, alltoall_async, grouped_allgather, grouped_allgather_async,
                                   grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
                                   grouped_allreduce_async_, grouped_reducescatter,
                                   grouped_reducescatter_async, reducescatter, reducescatter_async)

__all__ = [n for n in dir() if not n.startswith("_")]
