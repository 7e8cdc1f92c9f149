// One order for float sums (KOLO_DETERMINISTIC=1; docs/runtime.md, "One order for float
// sums"): an allreduce's float sum, average or product is the rank-order left fold,
// ((x0 + x1) + x2) + x3, whatever the executor (shared memory, MPI), host layout (pretend
// hosts: 2 x 2, 3 x 1, 2 + 1), fusion or chunking. Every rank computes that fold for itself
// and compares bit for bit; without the option the shared-memory executor on one host gives
// it too (docs/shm.md, "Determinism"), so the default one-host run is checked the same way.
//
// Every run also prints a hash of all its results (rank 0: "KOLO-DETERMINISTIC-HASH ..."),
// after checking every rank holds the same; test/mpi/deterministic_hashes.sh runs this binary
// under each executor and layout and fails if the hashes differ.
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == value;
}

// Where the result must be the rank-order fold: asked for, or shared memory on one host.
bool rank_order_expected() {
  if (env_is("KOLO_DETERMINISTIC", "1")) return true;
  return std::getenv("KOLO_CPU_OPERATIONS") == nullptr && std::getenv("KOLO_TEST_RANKS_PER_HOST") == nullptr &&
         local_size() == size();
}

uint64_t mix(uint64_t seed, int r, size_t i) {
  uint64_t k = seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(r + 1) * 0xBF58476D1CE4E5B9ULL +
               i * 0x94D049BB133111EBULL;
  k ^= k >> 31;
  k *= 0xD6E8FEB86659FD93ULL;
  return k ^ (k >> 32);
}

struct Case {
  const char* name;
  DType dtype;
  ReduceOp op;
  double pre = 1.0, post = 1.0;
};

const Case kCases[] = {
    {"f32.sum", DType::kFloat32, ReduceOp::kSum},
    {"f32.average", DType::kFloat32, ReduceOp::kAverage},
    {"f32.sum.scaled", DType::kFloat32, ReduceOp::kSum, 0.5, 3.0},
    {"f32.product", DType::kFloat32, ReduceOp::kProduct},
    {"f64.sum", DType::kFloat64, ReduceOp::kSum},
    {"f64.average.scaled", DType::kFloat64, ReduceOp::kAverage, 0.25, 1.5},
    {"f16.sum", DType::kFloat16, ReduceOp::kSum},
    {"bf16.average", DType::kBFloat16, ReduceOp::kAverage},
};

// Odd sizes: tiny, shared memory's one-step path, above it (chunked), several MPI chunks.
const size_t kCounts[] = {1, 7, 1001, 70001, 300007, 1100003};

size_t total_count() {
  size_t t = 0;
  for (size_t n : kCounts) t += n;
  return t;
}

// Rank r's element i as stored in the tensor: magnitudes from 2^-8 to 2^8 (so the order of
// additions shows in the low bits), near 1 for a product (so it neither overflows nor
// vanishes), rounded to the dtype.
double stored(const Case& c, uint64_t seed, int r, size_t i) {
  const uint64_t k = mix(seed, r, i);
  const double unit = static_cast<double>(k >> 11) * 0x1p-53;  // [0, 1)
  double v = (2.0 * unit - 1.0) * std::ldexp(1.0, static_cast<int>(k & 15) - 8);
  if (c.op == ReduceOp::kProduct) v = 1.0 + v / 512.0;
  switch (c.dtype) {
    case DType::kFloat32: return static_cast<float>(v);
    case DType::kFloat16: return half_to_float(float_to_half(static_cast<float>(v)));
    case DType::kBFloat16: return bf16_to_float(float_to_bf16(static_cast<float>(v)));
    default: return v;
  }
}

double post_factor(const Case& c) { return c.op == ReduceOp::kAverage ? c.post / size() : c.post; }

// The rank-order fold in the arithmetic of `T` (float32 for the 16-bit types, which round
// once at the end), with the prescale on every input and the post factor on the result.
template <typename T>
T fold(const Case& c, uint64_t seed, size_t i, int ranks) {
  const T pre = static_cast<T>(c.pre);
  T acc = 0;
  for (int r = 0; r < ranks; ++r) {
    T v = static_cast<T>(stored(c, seed, r, i));
    if (c.pre != 1.0) v = v * pre;
    acc = r == 0 ? v : c.op == ReduceOp::kProduct ? acc * v : acc + v;
  }
  const T f = static_cast<T>(post_factor(c));
  return post_factor(c) != 1.0 ? acc * f : acc;
}

// The expected bits of element i, as the low bytes of a uint64.
uint64_t reference_bits(const Case& c, uint64_t seed, size_t i) {
  uint64_t bits = 0;
  if (c.dtype == DType::kFloat64) {
    const double d = fold<double>(c, seed, i, size());
    std::memcpy(&bits, &d, 8);
    return bits;
  }
  const float f = fold<float>(c, seed, i, size());
  if (c.dtype == DType::kFloat16) return float_to_half(f).bits;
  if (c.dtype == DType::kBFloat16) return float_to_bf16(f).bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

uint64_t bits_at(const std::vector<std::byte>& mem, DType t, size_t i) {
  uint64_t bits = 0;
  std::memcpy(&bits, mem.data() + i * dtype_size(t), dtype_size(t));
  return bits;
}

void fill(std::vector<std::byte>& mem, const Case& c, uint64_t seed) {
  for (size_t i = 0; i < total_count(); ++i) set(mem.data(), c.dtype, i, stored(c, seed, rank(), i));
}

// One tensor per size, submitted together (the small ones fuse), or as one tensor of all.
void run(std::vector<std::byte>& mem, const Case& c, const std::string& tag, bool whole) {
  std::vector<Handle> hs;
  const size_t esize = dtype_size(c.dtype);
  if (whole) {
    hs.push_back(allreduce_async(TensorView{mem.data(), c.dtype, {static_cast<int64_t>(total_count())}}, tag,
                                 {c.op, c.pre, c.post}));
  } else {
    size_t at = 0;
    for (size_t k = 0; k < std::size(kCounts); at += kCounts[k], ++k) {
      const TensorView v{mem.data() + at * esize, c.dtype, {static_cast<int64_t>(kCounts[k])}};
      hs.push_back(allreduce_async(v, tag + "." + std::to_string(k), {c.op, c.pre, c.post}));
    }
  }
  for (auto& h : hs) wait_ok(h, 120);
}

uint64_t fnv(uint64_t h, const std::vector<std::byte>& mem, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) h = (h ^ static_cast<uint8_t>(mem[i])) * 1099511628211ULL;
  return h;
}

bool same_on_every_rank(uint64_t h) {
  unsigned long long lo = 0, hi = 0, mine = h;
  MPI_Allreduce(&mine, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

}  // namespace

TEST_CASE("float sums, averages and products: the rank-order fold, bit for bit, fused or whole",
          "[deterministic]") {
  const bool check = rank_order_expected();
  const size_t n = total_count();
  uint64_t hash = 1469598103934665603ULL, seed = 4100;
  for (const Case& c : kCases) {
    ++seed;
    const std::string tag = std::string("det.") + c.name;
    INFO(tag << " at np " << size());
    std::vector<std::byte> mem(n * dtype_size(c.dtype)), together;
    fill(mem, c, seed);
    run(mem, c, tag + ".together", /*whole=*/false);
    together = mem;
    hash = fnv(hash, mem, mem.size());
    // The same values as one tensor: other fusion, other chunks, other segment owners.
    fill(mem, c, seed);
    run(mem, c, tag + ".whole", /*whole=*/true);
    size_t unlike = 0, first = 0;
    for (size_t i = 0; i < n; ++i) {
      if (bits_at(mem, c.dtype, i) != bits_at(together, c.dtype, i) && unlike++ == 0) first = i;
    }
    INFO("as one tensor, " << unlike << " elements differ from the fused run, the first at " << first);
    if (check) CHECK(unlike == 0);
    size_t wrong = 0;
    first = 0;
    for (size_t i = 0; i < n; ++i) {
      if (bits_at(together, c.dtype, i) != reference_bits(c, seed, i) && wrong++ == 0) first = i;
    }
    if (!check) {  // what another order does to the bits (docs/correctness.md, finding 26)
      if (rank() == 0) std::printf("%s: %zu of %zu elements differ from the rank-order fold\n", tag.c_str(), wrong, n);
      continue;
    }
    INFO(wrong << " elements differ from the rank-order fold, the first at " << first << " (bits "
               << bits_at(together, c.dtype, first) << ", want " << reference_bits(c, seed, first) << ")");
    CHECK(wrong == 0);
  }
  CHECK(same_on_every_rank(hash));
  if (rank() == 0) {
    std::printf("KOLO-DETERMINISTIC-HASH np=%d %016llx\n", size(), static_cast<unsigned long long>(hash));
    std::fflush(stdout);
  }
}

TEST_CASE("the inputs tell the rank-order fold from other orders", "[deterministic]") {
  // Not a check of kolo: a check that the test above would notice another order. At np 4
  // the pairwise order (x0 + x1) + (x2 + x3) (MPI's recursive halving, two hosts' partials);
  // at np 3 the other association x0 + (x1 + x2).
  if (size() != 3 && size() != 4) return;
  const Case c = kCases[0];
  size_t differ = 0;
  const size_t n = 100000;
  for (size_t i = 0; i < n; ++i) {
    float x[4] = {0, 0, 0, 0};
    for (int r = 0; r < size(); ++r) x[r] = static_cast<float>(stored(c, 99, r, i));
    const float other = size() == 3 ? x[0] + (x[1] + x[2]) : (x[0] + x[1]) + (x[2] + x[3]);
    differ += fold<float>(c, 99, i, size()) != other;
  }
  INFO(differ << " of " << n << " elements differ at np " << size());
  CHECK(differ > n / 20);
}
