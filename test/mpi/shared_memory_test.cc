// kolo/memory.h through the runtime: allocate_shared, and the zero-copy allreduce of tensors
// that live there — bitwise the same as the copy path, on every rank. CTest runs this group
// with KOLO_SHM_ARENA_BYTES set (np 2, 4, and two pretend hosts; larger than /dev/shm), with
// its default (auto) and with 0 (none).
#include <mpi.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

// Values whose sum depends on the order of the additions (unlike small integers).
double noisy_value(uint64_t seed, int r, size_t i) {
  uint64_t k = seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(r) * 0xBF58476D1CE4E5B9ULL + i * 0x94D049BB133111EBULL;
  k ^= k >> 29;
  return static_cast<double>(k % 2000003) / 1000001.0 - 1.0;
}

uint64_t fnv(const void* p, size_t bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ULL;
  return h;
}

// True when every rank holds the same hash.
bool same_on_all_ranks(uint64_t h) {
  std::vector<uint64_t> all(static_cast<size_t>(size()));
  MPI_Allgather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (uint64_t x : all) {
    if (x != h) return false;
  }
  return true;
}

TensorView view(char* p, DType t, size_t count) {
  TensorView v;
  v.data = p;
  v.dtype = t;
  v.shape = {static_cast<int64_t>(count)};
  return v;
}

// Submits every view of `views` (names prefix.i) at once, then waits for all.
void allreduce_all(const std::vector<TensorView>& views, const std::string& prefix, ReduceOp op, double pre,
                   double post) {
  std::vector<Handle> hs;
  for (size_t i = 0; i < views.size(); ++i)
    hs.push_back(allreduce_async(views[i], prefix + std::to_string(i), {op, pre, post}));
  for (auto& h : hs) wait_ok(h);
}

// The size of /dev/shm (0 when unknown).
size_t dev_shm_bytes() {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return 0;
  return static_cast<size_t>(fs.f_blocks) * fs.f_frsize;
}

}  // namespace

TEST_CASE("by default (auto) one host with several ranks has an arena sized from /dev/shm", "[shared-memory]") {
  for (const char* knob : {"KOLO_SHM_ARENA_BYTES", "KOLO_CPU_OPERATIONS", "KOLO_TEST_RANKS_PER_HOST"}) {
    if (std::getenv(knob) != nullptr) return;  // not the default configuration
  }
  if (size() < 2 || local_size() != size()) {
    CHECK(shared_memory_capacity() == 0);  // auto: nothing to share with, or several hosts
    return;
  }
  const size_t fs = dev_shm_bytes();
  const size_t expected = std::min<size_t>(size_t{2} << 30, fs / static_cast<size_t>(local_size())) / 4096 * 4096;
  CHECK(expected > 0);
  CHECK(shared_memory_capacity() == expected);
}

TEST_CASE("an allocation /dev/shm cannot back throws naming /dev/shm, the bytes and the errno", "[shared-memory]") {
  // Needs an arena larger than /dev/shm (mpi.np2.shared-memory.oversized: 1024G): reserving
  // it costs nothing, committing more than the filesystem holds fails up front.
  const size_t fs = dev_shm_bytes();
  if (fs == 0 || shared_memory_available() < fs + (1u << 20)) return;
  const size_t before = shared_memory_available();
  const size_t big = fs + 4096;
  try {
    allocate_shared(big);
    FAIL("an allocation larger than /dev/shm succeeded");
  } catch (const Error& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("/dev/shm") != std::string::npos);
    CHECK(m.find(std::to_string(big)) != std::string::npos);
    CHECK(m.find(std::strerror(ENOSPC)) != std::string::npos);
  }
  CHECK(shared_memory_available() == before);  // a failed allocation takes nothing
  auto* p = static_cast<unsigned char*>(allocate_shared(4096));
  CHECK(p[4095] == 0);
  CHECK(release_shared(p));
  CHECK(shared_memory_available() == before);
}

TEST_CASE("allocate_shared without shared memory throws naming the knob", "[shared-memory]") {
  if (shared_memory_capacity() != 0) return;  // this run has KOLO_SHM_ARENA_BYTES
  CHECK(shared_memory_available() == 0);
  try {
    allocate_shared(64);
    FAIL("allocate_shared succeeded without shared memory");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("KOLO_SHM_ARENA_BYTES") != std::string::npos);
  }
}

TEST_CASE("allocate_shared: aligned, zeroed, bounded by the capacity with a clear error", "[shared-memory]") {
  if (shared_memory_capacity() == 0) return;
  const size_t before = shared_memory_available();
  REQUIRE(before > 4096);
  auto* p = static_cast<unsigned char*>(allocate_shared(100));
  CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  for (int i = 0; i < 100; ++i) CHECK(p[i] == 0);
  CHECK(shared_memory_available() <= before - 100);
  const size_t left = shared_memory_available();
  try {
    allocate_shared(left + 1);
    FAIL("an allocation beyond the capacity succeeded");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find("bytes per rank are left") != std::string::npos);
    CHECK(m.find(std::to_string(shared_memory_capacity())) != std::string::npos);
  }
  CHECK(shared_memory_available() == left);  // a failed allocation takes nothing
}

TEST_CASE("zero-copy allreduce equals the copy path bitwise, on every rank", "[shared-memory]") {
  if (shared_memory_capacity() == 0) return;
  // Sizes: tiny, odd, above the small path, and above one pipelining chunk (4 MiB).
  const std::vector<size_t> counts = {1, 17, 1000, 70001, 1300001};
  size_t total = 0;
  for (size_t c : counts) total += c;
  struct Kind {
    DType dtype;
    ReduceOp op;
    double pre, post;
  };
  const Kind kinds[] = {{DType::kFloat32, ReduceOp::kAverage, 1.0, 1.0},
                        {DType::kFloat32, ReduceOp::kSum, 0.5, 3.0},
                        {DType::kFloat64, ReduceOp::kAverage, 1.0, 2.0},
                        {DType::kFloat16, ReduceOp::kAverage, 1.0, 1.0},
                        {DType::kInt32, ReduceOp::kAverage, 1.0, 1.0},
                        {DType::kFloat32, ReduceOp::kMax, 1.0, 1.0}};
  // One shared block, carved alike on every rank (same offsets everywhere).
  const size_t bytes = total * sizeof(double);
  REQUIRE(shared_memory_available() >= bytes);
  auto* shared = static_cast<char*>(allocate_shared(bytes));
  std::vector<char> priv(bytes);
  uint64_t seed = 40;
  for (const Kind& k : kinds) {
    const size_t es = dtype_size(k.dtype);
    std::vector<TensorView> sv, pv;
    for (size_t i = 0, off = 0; i < counts.size(); off += counts[i] * es, ++i) {
      sv.push_back(view(shared + off, k.dtype, counts[i]));
      pv.push_back(view(priv.data() + off, k.dtype, counts[i]));
    }
    ++seed;
    for (size_t i = 0; i < total; ++i) {
      const double v = is_floating(k.dtype) ? noisy_value(seed, rank(), i) : input_value(seed, rank(), i, k.dtype, k.op);
      set(priv.data(), k.dtype, i, v);
    }
    std::memcpy(shared, priv.data(), total * es);
    const std::string tag = std::string(dtype_name(k.dtype)) + "." + std::string(reduce_op_name(k.op));
    allreduce_all(sv, "zc." + tag + ".", k.op, k.pre, k.post);
    allreduce_all(pv, "copy." + tag + ".", k.op, k.pre, k.post);
    INFO(tag);
    CHECK(std::memcmp(shared, priv.data(), total * es) == 0);
    CHECK(same_on_all_ranks(fnv(shared, total * es)));
  }
}

TEST_CASE("a tensor in shared memory on some ranks and private on others fails that collective only",
          "[shared-memory]") {
  // Zero copy applies on one host; across hosts every tensor takes the hierarchical path.
  if (shared_memory_capacity() == 0 || local_size() != size()) return;
  const int odd = size() - 1;  // this rank's tensors are private, the others' shared
  // 100,000 floats: above the one-step limit, so the sharing ranks take the zero-copy path
  // and the odd one the slot path; 1,000: every rank on the one-step slot path.
  for (const size_t n : {size_t{100000}, size_t{1000}}) {
    auto* shared = allocate_shared_array<float>(n);
    std::vector<float> priv(n);
    float* mine = rank() == odd ? priv.data() : shared;
    for (size_t i = 0; i < n; ++i) mine[i] = static_cast<float>(rank() + 1);
    const std::string name = "mixed." + std::to_string(n);
    const std::string m = wait_error(allreduce_async(TensorView{mine, DType::kFloat32, {static_cast<int64_t>(n)}}, name,
                                                     {ReduceOp::kSum}));
    INFO(m);
    CHECK(m.find("allreduce \"" + name + "\"") != std::string::npos);
    CHECK(m.find("private memory on rank " + std::to_string(odd)) != std::string::npos);
    CHECK(m.find("kolo's shared memory (offset") != std::string::npos);
    std::string sharing = "0";
    for (int r = 1; r < odd; ++r) sharing += "," + std::to_string(r);
    CHECK(m.find((odd > 1 ? ") on ranks " : ") on rank ") + sharing + " but in private") != std::string::npos);
    CHECK(mine[0] == static_cast<float>(rank() + 1));  // nothing was written
    CHECK(mine[n - 1] == static_cast<float>(rank() + 1));

    // The next collectives work: the same name with every rank's tensor shared, another
    // name with every rank's private; values are exact (sum of 1..size).
    const float want = static_cast<float>(size() * (size() + 1) / 2);
    for (size_t i = 0; i < n; ++i) shared[i] = priv[i] = static_cast<float>(rank() + 1);
    allreduce(TensorView{shared, DType::kFloat32, {static_cast<int64_t>(n)}}, name, {ReduceOp::kSum});
    allreduce(TensorView{priv.data(), DType::kFloat32, {static_cast<int64_t>(n)}}, name + ".private",
              {ReduceOp::kSum});
    CHECK(shared[0] == want);
    CHECK(shared[n - 1] == want);
    CHECK(priv[0] == want);
    CHECK(priv[n - 1] == want);
  }
}
