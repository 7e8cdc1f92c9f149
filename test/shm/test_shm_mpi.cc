// The shared-memory engine against MPI, under mpirun -np 2 and -np 4: integer results equal
// MPI_Allreduce bitwise, float results within tolerance of it and bitwise equal on every
// rank; broadcast and allgatherv equal MPI_Bcast / MPI_Allgatherv; the hierarchical path,
// with ranks split into pretend hosts, equals MPI_Allreduce over the whole job.
//
// Every rank runs every collective of a test even after a failure (the group is then broken
// and answers at once), so no rank is left waiting; each test ends by agreeing, over MPI,
// whether any rank failed.
#include <mpi.h>
#include <unistd.h>

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>

#include "kernels/cpu_reduce.h"
#include "ops/mpi_util.h"
#include "ops/shm/shm_hierarchical.h"
#include "test/shm/shm_test_data.h"

namespace kolo::shm::testing {
namespace {

struct World {
  int rank = 0, size = 1;
  MPI_Comm local = MPI_COMM_NULL;
  std::unique_ptr<ShmGroup> group;  // all ranks of the host, 256 KiB segment: many chunks
};
World world;

std::string job_name(const std::string& tag) {
  int pid = static_cast<int>(getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return "/kolo-mpitest-" + std::to_string(pid) + "-" + tag;
}

Status make_group(MPI_Comm comm, const std::string& name, std::unique_ptr<ShmGroup>* out) {
  ShmGroup::Options o;
  o.name = name;
  MPI_Comm_rank(comm, &o.local_rank);
  MPI_Comm_size(comm, &o.local_size);
  o.segment_bytes = 256u << 10;
  o.small_bytes = 4096;
  o.peer_timeout = std::chrono::milliseconds(30000);
  return ShmGroup::create(o, mpi_agree(comm), out);
}

// The first error of any rank, known to all ranks ("" when none).
std::string any_rank_error(const std::string& mine) {
  int bad = mine.empty() ? 0 : 1, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any == 0) return "";
  return mine.empty() ? "another rank failed" : "rank " + std::to_string(world.rank) + ": " + mine;
}

// Same bytes on every rank?
bool identical_everywhere(const std::vector<std::byte>& buf) {
  const unsigned long long h = hash_bytes(buf.data(), buf.size());
  unsigned long long lo = 0, hi = 0;
  MPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

// The MPI path's answer: MPI_Allreduce over `comm`, then the same postscale step.
std::vector<std::byte> mpi_allreduce(std::vector<std::byte> buf, DType t, ReduceOp op, double pre,
                                     double post, MPI_Comm comm) {
  int n = 1;
  MPI_Comm_size(comm, &n);
  const size_t count = buf.size() / dtype_size(t);
  ops::scale_copy(buf.data(), buf.data(), count, t, pre);
  MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), ops::mpi_dtype(t), ops::mpi_reduce_op(t, op), comm);
  ops::apply_postscale(buf.data(), count, t, op, n, post);
  return buf;
}

// Integers: bitwise. Floats: within a tolerance that allows for a different summation order.
std::string compare_with_mpi(const std::vector<std::byte>& got, const std::vector<std::byte>& mpi,
                             DType t) {
  if (!is_floating(t)) return first_difference(got, mpi, t);
  const double rel = t == DType::kFloat16 ? 1e-2 : t == DType::kBFloat16 ? 6e-2 : t == DType::kFloat32 ? 1e-5 : 1e-12;
  for (size_t i = 0; i < got.size() / dtype_size(t); ++i) {
    const double a = element(got.data(), i, t), b = element(mpi.data(), i, t);
    if (std::fabs(a - b) > rel * std::max(1.0, std::fabs(b))) {
      return "element " + std::to_string(i) + ": shm " + std::to_string(a) + " vs MPI " + std::to_string(b);
    }
  }
  return "";
}

// One allreduce case through `run`, checked three ways: the reference (bitwise), MPI
// (bitwise for integers, tolerance for floats), and the other ranks (bitwise).
template <class Run>
std::string check_against_mpi(Run&& run, MPI_Comm mpi_comm, int nranks, uint64_t seed, size_t count,
                              DType t, ReduceOp op, double pre, double post) {
  std::vector<std::byte> buf = make_input(seed, world.rank, count, t, op);
  const std::vector<std::byte> via_mpi = mpi_allreduce(buf, t, op, pre, post, mpi_comm);
  Status s = run(buf, t, op, pre, post);
  const std::string what = std::string(dtype_name(t)) + " " + std::string(reduce_op_name(op)) +
                           " count " + std::to_string(count) + ": ";
  const bool same = identical_everywhere(buf);  // collective: before any early return
  if (!s.is_ok()) return what + s.to_string();
  if (!same) return what + "ranks hold different bytes";
  std::string d = compare_with_mpi(buf, via_mpi, t);
  if (d.empty() && nranks > 0) d = first_difference(buf, reference_allreduce(seed, nranks, count, t, op, pre, post), t);
  return d.empty() ? "" : what + d;
}

}  // namespace

TEST_CASE("mpi: shm allreduce equals MPI_Allreduce (ints bitwise, floats within tolerance) and is "
          "identical on every rank, every dtype and op", "[shm][mpi]") {
  const auto run = [](std::vector<std::byte>& b, DType t, ReduceOp op, double pre, double post) {
    return world.group->allreduce(b.data(), b.size() / dtype_size(t), t, op, pre, post);
  };
  std::string err;
  uint64_t seed = 7;
  // 0, 1, odd, around the small-path limit, beyond the segment (256 KiB) with a ragged end.
  for (size_t count : {0, 1, 513, 1024, 1025, 100003}) {
    for (DType t : kAllDTypes) {
      for (ReduceOp op : kAllOps) {
        const std::string e = check_against_mpi(run, MPI_COMM_WORLD, world.size, ++seed, count, t, op, 1.0, 1.0);
        if (err.empty()) err = e;
      }
    }
  }
  err = any_rank_error(err);
  INFO(err);
  REQUIRE(err.empty());
}

TEST_CASE("mpi: shm allreduce with prescale and postscale equals the MPI path", "[shm][mpi]") {
  const auto run = [](std::vector<std::byte>& b, DType t, ReduceOp op, double pre, double post) {
    return world.group->allreduce(b.data(), b.size() / dtype_size(t), t, op, pre, post);
  };
  std::string err;
  uint64_t seed = 900;
  for (size_t count : {3, 70001}) {
    for (DType t : kAllDTypes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        const std::string e = check_against_mpi(run, MPI_COMM_WORLD, world.size, ++seed, count, t, op, 0.5, 3.0);
        if (err.empty()) err = e;
      }
    }
  }
  err = any_rank_error(err);
  INFO(err);
  REQUIRE(err.empty());
}

TEST_CASE("mpi: shm allreduce of 161 tensors in one call equals one MPI_Allreduce per tensor",
          "[shm][mpi]") {
  std::vector<std::vector<float>> tensors;
  std::vector<Piece> pieces;
  for (int i = 0; i < 161; ++i) {
    const size_t n = (i % 7 == 0) ? 60000 + i : (i % 3 == 0 ? 1 : 17 * i);
    std::vector<std::byte> in = make_input(5000 + i, world.rank, n, DType::kFloat32, ReduceOp::kSum);
    tensors.emplace_back(n);
    std::memcpy(tensors.back().data(), in.data(), in.size());
  }
  auto expected = tensors;
  for (auto& t : expected) MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (auto& t : tensors) pieces.push_back({t.data(), t.size()});
  Status s = world.group->allreduce(pieces, DType::kFloat32, ReduceOp::kSum);
  std::string err = s.is_ok() ? "" : s.to_string();
  for (size_t i = 0; err.empty() && i < tensors.size(); ++i) {
    for (size_t k = 0; k < tensors[i].size(); ++k) {
      if (std::fabs(tensors[i][k] - expected[i][k]) > 1e-5f * std::max(1.0f, std::fabs(expected[i][k]))) {
        err = "tensor " + std::to_string(i) + " element " + std::to_string(k) + " differs from MPI";
        break;
      }
    }
  }
  err = any_rank_error(err);
  INFO(err);
  REQUIRE(err.empty());
}

TEST_CASE("mpi: shm broadcast from every root equals MPI_Bcast", "[shm][mpi]") {
  std::string err;
  for (size_t bytes : {0, 1, 4097, 300001}) {
    for (int root = 0; root < world.size; ++root) {
      auto buf = make_input(bytes * 31 + root, world.rank, bytes, DType::kUInt8, ReduceOp::kSum);
      auto want = buf;
      MPI_Bcast(want.data(), static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
      Status s = world.group->broadcast(buf.data(), bytes, root);
      if (err.empty() && !s.is_ok()) err = s.to_string();
      if (err.empty() && buf != want) err = "broadcast of " + std::to_string(bytes) + " bytes from " + std::to_string(root) + " differs";
    }
  }
  err = any_rank_error(err);
  INFO(err);
  REQUIRE(err.empty());
}

TEST_CASE("mpi: shm allgatherv with differing sizes equals MPI_Allgatherv", "[shm][mpi]") {
  std::string err;
  for (size_t scale : {0, 1, 1000, 90001}) {
    std::vector<size_t> sizes;
    std::vector<int> counts, displs;
    size_t total = 0;
    for (int j = 0; j < world.size; ++j) {
      sizes.push_back(j % 2 == 0 ? scale * (j + 1) : scale / 3);
      counts.push_back(static_cast<int>(sizes.back()));
      displs.push_back(static_cast<int>(total));
      total += sizes.back();
    }
    const auto in = make_input(scale, world.rank, sizes[world.rank], DType::kUInt8, ReduceOp::kSum);
    std::vector<std::byte> got(total), want(total);
    MPI_Allgatherv(in.data(), counts[world.rank], MPI_BYTE, want.data(), counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD);
    Status s = world.group->allgatherv(in.data(), got.data(), sizes);
    if (err.empty() && !s.is_ok()) err = s.to_string();
    if (err.empty() && got != want) err = "allgatherv with scale " + std::to_string(scale) + " differs";
  }
  err = any_rank_error(err);
  INFO(err);
  REQUIRE(err.empty());
}

TEST_CASE("mpi: hierarchical allreduce over pretend hosts equals MPI_Allreduce over the job",
          "[shm][mpi][hierarchical]") {
  // Pretend hosts of two consecutive ranks: np=4 is 2 hosts x 2 ranks, np=2 is 1 host.
  MPI_Comm host = MPI_COMM_NULL, cross = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world.rank / 2, world.rank, &host);
  int host_rank = 0;
  MPI_Comm_rank(host, &host_rank);
  MPI_Comm_split(MPI_COMM_WORLD, host_rank == 0 ? 0 : MPI_UNDEFINED, world.rank, &cross);
  std::unique_ptr<ShmGroup> g;
  Status created = make_group(host, job_name("host" + std::to_string(world.rank / 2)), &g);
  std::string err = created.is_ok() ? "" : created.to_string();
  REQUIRE(any_rank_error(err).empty());
  const HierarchicalComms comms{cross, world.size};
  const auto run = [&](std::vector<std::byte>& b, DType t, ReduceOp op, double pre, double post) {
    const Piece p{b.data(), b.size() / dtype_size(t)};
    return hierarchical_allreduce(*g, comms, {&p, 1}, t, op, pre, post);
  };
  uint64_t seed = 3000;
  for (size_t count : {0, 1, 777, 100003}) {
    for (DType t : kAllDTypes) {
      for (ReduceOp op : kAllOps) {
        const double pre = op == ReduceOp::kProduct ? 1.0 : 0.5;
        // No rank-ordered reference here (nranks 0): MPI's order between hosts is its own.
        const std::string e = check_against_mpi(run, MPI_COMM_WORLD, 0, ++seed, count, t, op, pre, 2.0);
        if (err.empty()) err = e;
      }
    }
  }
  err = any_rank_error(err);
  g.reset();
  if (cross != MPI_COMM_NULL) MPI_Comm_free(&cross);
  MPI_Comm_free(&host);
  INFO(err);
  REQUIRE(err.empty());
}

}  // namespace kolo::shm::testing

int main(int argc, char** argv) {
  using kolo::shm::testing::world;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world.size);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &world.local);
  kolo::Status s = kolo::shm::testing::make_group(world.local, kolo::shm::testing::job_name("all"), &world.group);
  int failed = 0;
  if (!s.is_ok()) {
    std::fprintf(stderr, "rank %d: %s\n", world.rank, s.to_string().c_str());
    failed = 1;
  } else {
    failed = Catch::Session().run(argc, argv) != 0 ? 1 : 0;
  }
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  world.group.reset();
  MPI_Comm_free(&world.local);
  MPI_Finalize();
  return any;
}
