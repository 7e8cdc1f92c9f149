// ShmExecutor (kolo's Executor over shared memory) against the MPI executor, under mpirun:
// the same responses — fused allreduce with scales, broadcast, allgather with uneven first
// dimensions, and a fused allreduce of tensors in the arena — give the same results.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>

#include "core/handle_state.h"
#include "ops/mpi_executor.h"
#include "ops/shm/shm_executor.h"

namespace kolo::shm::testing {
namespace {

struct Fixture {
  Topology topo;
  MPI_Comm local = MPI_COMM_NULL, cross = MPI_COMM_NULL;
  std::unique_ptr<ShmExecutor> shm;
  std::unique_ptr<ops::MpiExecutor> mpi;

  Fixture() {
    MPI_Comm_rank(MPI_COMM_WORLD, &topo.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &topo.size);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, topo.rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &topo.local_rank);
    MPI_Comm_size(local, &topo.local_size);
    MPI_Comm_split(MPI_COMM_WORLD, topo.local_rank, topo.rank, &cross);
    ShmExecutor::Options o;
    o.chunk_bytes = 32u << 10;
    o.arena_bytes = 1u << 20;
    Status s = ShmExecutor::create(topo, MPI_COMM_WORLD, local, cross, o, &shm);
    if (!s.is_ok()) FAIL(s.to_string());
    mpi = std::make_unique<ops::MpiExecutor>(MPI_COMM_WORLD, 64u << 10);
  }
  ~Fixture() {
    shm.reset();
    MPI_Comm_free(&cross);
    MPI_Comm_free(&local);
  }
};

TensorEntry entry(const std::string& name, void* data, DType t, Shape shape) {
  TensorEntry e;
  e.view.data = data;
  e.view.dtype = t;
  e.view.shape = std::move(shape);
  e.handle = std::make_shared<kolo::detail::HandleState>(name, kolo::OpKind::kAllreduce);
  return e;
}

// Fills tensor k of this rank with values every rank can tell apart.
std::vector<float> values(size_t n, int rank, int k) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7 + static_cast<size_t>(k) * 13) % 101) / 8.0f + rank;
  return v;
}

bool close(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::fabs(a[i] - b[i]) > 1e-5f * std::max(1.0f, std::fabs(b[i]))) return false;
  }
  return a.size() == b.size();
}

}  // namespace

TEST_CASE("mpi: ShmExecutor gives the MPI executor's results for fused allreduce, broadcast, "
          "allgather and arena tensors", "[shm][mpi][executor]") {
  Fixture f;
  REQUIRE(f.shm != nullptr);
  const int rank = f.topo.rank;

  Response ar;
  ar.type = Response::Type::kAllreduce;
  ar.names = {"a", "b", "c"};
  ar.reduce_op = ReduceOp::kAverage;
  ar.prescale = 0.5;
  ar.postscale = 3.0;
  ar.sizes = {5, 70001, 1};
  REQUIRE(f.shm->accepts(ar));
  std::vector<std::vector<float>> via_shm, via_mpi;
  for (int k = 0; k < 3; ++k) via_shm.push_back(values(static_cast<size_t>(ar.sizes[k]), rank, k));
  via_mpi = via_shm;
  std::vector<TensorEntry> es, em;
  for (int k = 0; k < 3; ++k) {
    es.push_back(entry(ar.names[k], via_shm[k].data(), DType::kFloat32, {ar.sizes[k]}));
    em.push_back(entry(ar.names[k], via_mpi[k].data(), DType::kFloat32, {ar.sizes[k]}));
  }
  REQUIRE(f.shm->execute(ar, es).is_ok());
  REQUIRE(f.mpi->execute(ar, em).is_ok());
  for (int k = 0; k < 3; ++k) CHECK(close(via_shm[k], via_mpi[k]));

  // Arena: the same response on tensors allocated from the shared gradient memory.
  ShmArena* arena = f.shm->arena();
  REQUIRE(arena != nullptr);
  std::vector<TensorEntry> ea;
  std::vector<float*> in_arena;
  for (int k = 0; k < 3; ++k) {
    auto* p = static_cast<float*>(arena->allocate(static_cast<size_t>(ar.sizes[k]) * sizeof(float)));
    REQUIRE(p != nullptr);
    const auto v = values(static_cast<size_t>(ar.sizes[k]), rank, k);
    std::copy(v.begin(), v.end(), p);
    in_arena.push_back(p);
    ea.push_back(entry(ar.names[k], p, DType::kFloat32, {ar.sizes[k]}));
  }
  REQUIRE(f.shm->execute(ar, ea).is_ok());
  for (int k = 0; k < 3; ++k) CHECK(close(std::vector<float>(in_arena[k], in_arena[k] + ar.sizes[k]), via_mpi[k]));

  Response bc;
  bc.type = Response::Type::kBroadcast;
  bc.names = {"w"};
  bc.root = f.topo.size - 1;
  std::vector<float> w = values(100000, rank, 9), want = values(100000, bc.root, 9);
  std::vector<TensorEntry> eb{entry("w", w.data(), DType::kFloat32, {100000})};
  REQUIRE(f.shm->execute(bc, eb).is_ok());
  CHECK(w == want);

  Response ag;
  ag.type = Response::Type::kAllgather;
  ag.names = {"rows"};
  for (int j = 0; j < f.topo.size; ++j) ag.sizes.push_back(j + 1);  // rank j has j+1 rows of 3
  std::vector<float> mine = values(static_cast<size_t>(3 * (rank + 1)), rank, 4);
  std::vector<TensorEntry> gs{entry("rows", mine.data(), DType::kFloat32, {rank + 1, 3})};
  std::vector<TensorEntry> gm{entry("rows", mine.data(), DType::kFloat32, {rank + 1, 3})};
  REQUIRE(f.shm->execute(ag, gs).is_ok());
  REQUIRE(f.mpi->execute(ag, gm).is_ok());
  CHECK(gs[0].handle->extra().gathered.shape == gm[0].handle->extra().gathered.shape);
  CHECK(gs[0].handle->extra().gathered.bytes == gm[0].handle->extra().gathered.bytes);
}

}  // namespace kolo::shm::testing
