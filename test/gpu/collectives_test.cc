// GPU collectives through kolo's public API, on every rank (see collectives_main.cc). Each
// rank makes its data from (seed, rank, index), so each computes the expected result alone.
// Which executor runs them (NCCL or host-staged) is KOLO_GPU_OPERATIONS's choice.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cstring>

#include "kolo/kolo.h"
#include "ops/gpu/nccl_executor.h"
#include "test/gpu/gpu_test_util.h"
#include "test/mpi/mpi_test_util.h"

using namespace kolo;
using kolo::test::Buffer;
using kolo::test::DeviceMem;

namespace {

int current_device() {
  int d = 0;
  cudaGetDevice(&d);
  return d;
}

TensorView gpu_view(const DeviceMem& mem, DType t, Shape shape) {
  TensorView v{mem.get(), t, std::move(shape)};
  v.device = Device::gpu(current_device());
  return v;
}

// Fills `b` with this rank's inputs for (seed, op).
void fill(Buffer& b, uint64_t seed, ReduceOp op) {
  for (size_t i = 0; i < b.count(); ++i) b.put(i, test::input_value(seed, rank(), i, b.dtype, op));
}

void check_allreduce(const Buffer& got, uint64_t seed, ReduceOp op, double pre, double post, size_t first = 0) {
  for (size_t i = 0; i < got.count(); ++i) {
    const double want = test::expected_allreduce(seed, size(), first + i, got.dtype, op, pre, post);
    INFO(dtype_name(got.dtype) << " " << reduce_op_name(op) << " element " << i);
    REQUIRE(std::abs(got.at(i) - want) <= test::tolerance(got.dtype, want));
  }
}

}  // namespace

TEST_CASE("allreduce of one GPU tensor, in place, every dtype and op", "[gpu]") {
  uint64_t seed = 100;
  for (DType t : test::all_dtypes()) {
    for (ReduceOp op : test::all_reduce_ops()) {
      Buffer b(t, 1001);
      fill(b, ++seed, op);
      DeviceMem d(b.bytes.size());
      d.upload(b.bytes.data());
      allreduce(gpu_view(d, t, {1001}), "gpu.one." + std::to_string(seed), AllreduceOptions{op, 1.0, 1.0});
      d.download(b.bytes.data());
      check_allreduce(b, seed, op, 1.0, 1.0);
    }
  }
}

TEST_CASE("allreduce of GPU tensors applies prescale and postscale", "[gpu]") {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kInt32}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      Buffer b(t, 257);
      fill(b, 7, op);
      DeviceMem d(b.bytes.size());
      d.upload(b.bytes.data());
      allreduce(gpu_view(d, t, {257}), std::string("gpu.scaled.") + std::string(dtype_name(t)) + std::string(reduce_op_name(op)),
                AllreduceOptions{op, 2.0, 0.5});
      d.download(b.bytes.data());
      check_allreduce(b, 7, op, 2.0, 0.5);
    }
  }
}

TEST_CASE("fused allreduce of many GPU tensors at unaligned offsets", "[gpu]") {
  // One arena, tensors carved at element (not 16-byte) offsets, sizes 0..61: the fusion
  // pack/unpack kernel sees every alignment; submitted together they are fused.
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kInt64}) {
    const size_t n = 40;
    std::vector<size_t> counts(n), firsts(n);
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      counts[i] = (i * 37 + 3) % 62;
      firsts[i] = total;
      total += counts[i] + (i % 3);  // gaps, so neighbours are not contiguous
    }
    Buffer all(t, total);
    fill(all, 55, ReduceOp::kAverage);
    DeviceMem d(all.bytes.size());
    d.upload(all.bytes.data());
    std::vector<Handle> hs;
    for (size_t i = 0; i < n; ++i) {
      TensorView v = gpu_view(d, t, {static_cast<int64_t>(counts[i])});
      v.data = d.get() + firsts[i] * dtype_size(t);
      hs.push_back(allreduce_async(v, "gpu.fused." + std::string(dtype_name(t)) + "." + std::to_string(i),
                                   ReduceOp::kAverage));
    }
    for (const Handle& h : hs) test::wait_ok(h);
    Buffer got(t, total);
    d.download(got.bytes.data());
    for (size_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < (i % 3); ++k)  // gap elements: untouched
        REQUIRE(got.at(firsts[i] + counts[i] + k) == all.at(firsts[i] + counts[i] + k));
      Buffer one(t, counts[i]);
      std::memcpy(one.bytes.data(), got.bytes.data() + firsts[i] * dtype_size(t), one.bytes.size());
      check_allreduce(one, 55, ReduceOp::kAverage, 1.0, 1.0, firsts[i]);
    }
  }
}

TEST_CASE("allreduce waits for the tensor's ready_event before reading it", "[gpu]") {
  // The producer's copy is still running on its own stream when the tensor is submitted; a
  // reduction that did not wait for the event would read zeros or a partial copy.
  const size_t count = 16u << 20;  // 64 MiB of float
  Buffer b(DType::kFloat32, count);
  fill(b, 9, ReduceOp::kSum);
  void* pinned = nullptr;
  CUDA_REQUIRE(cudaMallocHost(&pinned, b.bytes.size()));
  std::memcpy(pinned, b.bytes.data(), b.bytes.size());
  DeviceMem d(b.bytes.size());
  CUDA_REQUIRE(cudaMemset(d.get(), 0, d.bytes()));
  CUDA_REQUIRE(cudaDeviceSynchronize());  // the legacy-stream memset must not race the producer's copy
  cudaStream_t producer;
  cudaEvent_t ready;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
  CUDA_REQUIRE(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  CUDA_REQUIRE(cudaMemcpyAsync(d.get(), pinned, d.bytes(), cudaMemcpyHostToDevice, producer));
  CUDA_REQUIRE(cudaEventRecord(ready, producer));
  TensorView v = gpu_view(d, DType::kFloat32, {static_cast<int64_t>(count)});
  v.ready_event = ready;
  allreduce(v, "gpu.ready-event", AllreduceOptions{ReduceOp::kSum, 1.0, 1.0});
  d.download(b.bytes.data());
  check_allreduce(b, 9, ReduceOp::kSum, 1.0, 1.0);
  cudaEventDestroy(ready);
  cudaStreamDestroy(producer);
  cudaFreeHost(pinned);
}

TEST_CASE("broadcast of GPU tensors from the last rank", "[gpu]") {
  const int root = size() - 1;
  std::vector<Handle> hs;
  std::vector<std::unique_ptr<DeviceMem>> mems;
  std::vector<Buffer> mine;
  for (DType t : test::all_dtypes()) {
    Buffer b(t, 333);
    for (size_t i = 0; i < b.count(); ++i) b.put(i, test::input_value(3, rank(), i, t, ReduceOp::kSum));
    mems.push_back(std::make_unique<DeviceMem>(b.bytes.size()));
    mems.back()->upload(b.bytes.data());
    hs.push_back(broadcast_async(gpu_view(*mems.back(), t, {333}), root, "gpu.bcast." + std::string(dtype_name(t))));
    mine.push_back(std::move(b));
  }
  for (const Handle& h : hs) test::wait_ok(h);
  for (size_t k = 0; k < mems.size(); ++k) {
    mems[k]->download(mine[k].bytes.data());
    for (size_t i = 0; i < mine[k].count(); ++i)
      REQUIRE(mine[k].at(i) == test::input_value(3, root, i, mine[k].dtype, ReduceOp::kSum));
  }
}

TEST_CASE("allgather of GPU tensors with a different first dimension per rank", "[gpu]") {
  // Rank r contributes r+1 rows of 3 columns (rank 0 one row): a ragged gather.
  const int64_t rows = rank() + 1, cols = 3;
  Buffer b(DType::kFloat32, static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < b.count(); ++i) b.put(i, rank() * 1000 + static_cast<double>(i));
  DeviceMem d(b.bytes.size());
  d.upload(b.bytes.data());
  const Tensor out = allgather(gpu_view(d, DType::kFloat32, {rows, cols}), "gpu.allgather");
  const int64_t total = static_cast<int64_t>(size()) * (size() + 1) / 2;
  REQUIRE(out.shape == Shape{total, cols});
  size_t at = 0;
  for (int r = 0; r < size(); ++r)
    for (int64_t i = 0; i < (r + 1) * cols; ++i, ++at) REQUIRE(out.data<float>()[at] == r * 1000 + static_cast<float>(i));
}

TEST_CASE("NcclExecutor building blocks: reduce-scatter and allreduce of a device buffer", "[gpu]") {
  // A communicator of its own (on a duplicate of MPI_COMM_WORLD), beside kolo's. NCCL needs a
  // GPU per rank; where ranks share one, this part has nothing to test.
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  int crowded = local_size() > gpus ? 1 : 0, any_crowded = 0;
  MPI_Allreduce(&crowded, &any_crowded, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_crowded) {
    WARN("ranks share a GPU: NCCL building blocks not tested");
    return;
  }
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  {
    ops::gpu::NcclExecutor exec(comm);
    const size_t per_rank = 1000;
    Buffer b(DType::kFloat32, per_rank * static_cast<size_t>(size()));
    fill(b, 21, ReduceOp::kAverage);
    DeviceMem send(b.bytes.size()), recv(per_rank * 4);
    send.upload(b.bytes.data());
    const Status s = exec.reducescatter_buffer(current_device(), send.get(), recv.get(), per_rank, DType::kFloat32,
                                               ReduceOp::kAverage);
    INFO(s.to_string());
    REQUIRE(s.is_ok());
    Buffer mine(DType::kFloat32, per_rank);
    recv.download(mine.bytes.data());
    check_allreduce(mine, 21, ReduceOp::kAverage, 1.0, 1.0, per_rank * static_cast<size_t>(rank()));

    fill(b, 22, ReduceOp::kMax);
    send.upload(b.bytes.data());
    REQUIRE(exec.allreduce_buffer(current_device(), send.get(), b.count(), DType::kFloat32, ReduceOp::kMax, 1.0, 3.0)
                .is_ok());
    send.download(b.bytes.data());
    check_allreduce(b, 22, ReduceOp::kMax, 1.0, 3.0);
  }
  MPI_Comm_free(&comm);
}

TEST_CASE("alltoall of a GPU tensor with uneven splits, zeros included", "[gpu]") {
  const int n = size(), me = rank();
  auto split = [&](int src, int dst) { return static_cast<int64_t>((src * 3 + dst * 5) % 4); };
  std::vector<int64_t> mine;
  int64_t rows = 0;
  for (int d = 0; d < n; ++d) mine.push_back(split(me, d)), rows += mine.back();
  Buffer b(DType::kFloat32, static_cast<size_t>(rows * 3));
  fill(b, 300, ReduceOp::kMax);
  DeviceMem d(std::max<size_t>(1, b.bytes.size()));
  d.upload(b.bytes.data());
  std::vector<int64_t> received;
  Tensor out = alltoall(gpu_view(d, DType::kFloat32, {rows, 3}), mine, "gpu.a2a", &received);
  size_t at = 0;
  for (int src = 0; src < n; ++src) {
    CHECK(received[src] == split(src, me));
    int64_t offset = 0;
    for (int q = 0; q < me; ++q) offset += split(src, q);
    for (int64_t i = 0; i < split(src, me) * 3; ++i, ++at)
      REQUIRE(test::get(out.bytes.data(), DType::kFloat32, at) ==
              test::input_value(300, src, static_cast<size_t>(offset * 3 + i), DType::kFloat32, ReduceOp::kMax));
  }
  CHECK(at == static_cast<size_t>(out.num_elements()));
}

TEST_CASE("reducescatter of GPU tensors: even and uneven first dimensions, scaled", "[gpu]") {
  for (int64_t dim0 : {int64_t{4} * size(), int64_t{4} * size() + 1}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
      Buffer b(DType::kFloat32, static_cast<size_t>(dim0 * 5));
      fill(b, 400, op);
      DeviceMem d(b.bytes.size());
      d.upload(b.bytes.data());
      Tensor out = reducescatter(gpu_view(d, DType::kFloat32, {dim0, 5}),
                                 "gpu.rs." + std::to_string(dim0) + std::string(reduce_op_name(op)),
                                 AllreduceOptions{op, 2.0, 0.5});
      int64_t first = 0;
      const int64_t rows = reducescatter_rows(dim0, size(), rank(), &first);
      REQUIRE(out.shape == Shape{rows, 5});
      Buffer got(DType::kFloat32, static_cast<size_t>(rows * 5));
      std::memcpy(got.bytes.data(), out.bytes.data(), got.bytes.size());
      check_allreduce(got, 400, op, 2.0, 0.5, static_cast<size_t>(first * 5));
    }
  }
}
