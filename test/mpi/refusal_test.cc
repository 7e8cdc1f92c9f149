// A submission that one rank alone refuses (a bad root, a non-finite scale, an empty split
// list, ...) while its peers submit a valid collective under the same name: every rank's
// handle fails within seconds instead of the peers waiting for the stall inspector. The
// refusing rank fails with its own reason; the others with that reason plus "refused on rank
// N when submitted". The name is free again afterwards on every rank. Each case is run with
// every rank in turn as the refusing one (rank 0 negotiates, so it is a case of its own).
#include <cmath>
#include <string>
#include <vector>

#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

// Waits for `h` to fail and checks who says what. Bounded: before the fix the peers hung.
void expect_refused(const Handle& h, int odd, const std::string& reason) {
  const std::string m = wait_error(h, 60);
  INFO("rank " << rank() << " (rank " << odd << " refused): " << m);
  CHECK_THAT(m, Catch::Contains(reason));
  if (rank() == odd) {
    CHECK_THAT(m, !Catch::Contains("when submitted"));
    CHECK(h.status().code() == Status::Code::kInvalidArgument);
  } else {
    CHECK_THAT(m, Catch::Contains("refused on rank " + std::to_string(odd) + " when submitted"));
  }
}

// The name works again on every rank, with exact results.
void name_is_free(const std::string& name) {
  std::vector<float> v(6, static_cast<float>(rank() + 1));
  wait_ok(allreduce_async(TensorView::of(v), name, {ReduceOp::kSum}));
  const float want = static_cast<float>(size() * (size() + 1) / 2);
  CHECK(v[0] == want);
  CHECK(v[5] == want);
}

std::string tag(const char* what, int odd) { return std::string("refuse.") + what + "." + std::to_string(odd); }

}  // namespace

TEST_CASE("a bad broadcast root on one rank fails the broadcast on every rank", "[refusal]") {
  for (int odd = 0; odd < size(); ++odd) {
    const std::string name = tag("root", odd);
    std::vector<float> v(5, 1.0f);
    expect_refused(broadcast_async(TensorView::of(v), rank() == odd ? size() : 0, name), odd,
                   "root " + std::to_string(size()) + " is not a rank");
    name_is_free(name);
  }
}

TEST_CASE("a non-finite scale on one rank fails the allreduce on every rank", "[refusal]") {
  for (int odd = 0; odd < size(); ++odd) {
    const std::string name = tag("scale", odd);
    std::vector<float> v(7, 1.0f);
    const double post = rank() == odd ? HUGE_VAL : 1.0;
    expect_refused(allreduce_async(TensorView::of(v), name, {ReduceOp::kSum, 1.0, post}), odd,
                   "scale factors must be finite");
    CHECK(v[0] == 1.0f);  // nothing ran anywhere
    name_is_free(name);
  }
}

TEST_CASE("a bool average on one rank fails the bool sum of the others", "[refusal]") {
  for (int odd = 0; odd < size(); ++odd) {
    const std::string name = tag("bool", odd);
    std::vector<uint8_t> b(9, 1);
    const TensorView bv{b.data(), DType::kBool, {9}};
    expect_refused(allreduce_async(bv, name, {rank() == odd ? ReduceOp::kAverage : ReduceOp::kSum}), odd,
                   "average of bool tensors is not defined");
    name_is_free(name);
  }
}

TEST_CASE("an empty split list on one rank fails the alltoall on every rank", "[refusal]") {
  const int n = size();
  for (int odd = 0; odd < n; ++odd) {
    const std::string name = tag("splits", odd);
    std::vector<float> v(static_cast<size_t>(2 * n), static_cast<float>(rank()));
    const std::vector<int64_t> splits = rank() == odd ? std::vector<int64_t>{} : std::vector<int64_t>(n, 2);
    expect_refused(alltoall_async(TensorView::of(v), splits, name), odd, "splits is empty");
    name_is_free(name);
  }
}

TEST_CASE("an alltoall into an output from a GPU input on one rank fails on every rank", "[refusal]") {
  // The input is never read: the refusal comes first (the pointer is host memory).
  const int n = size();
  for (int odd = 0; odd < n; ++odd) {
    const std::string name = tag("into-gpu", odd);
    std::vector<float> in(static_cast<size_t>(n), 1.0f), out(static_cast<size_t>(n), -1.0f);
    TensorView input = TensorView::of(in);
    if (rank() == odd) input.device = Device::gpu(0);
    expect_refused(alltoall_async(input, TensorView::of(out), name), odd, "takes CPU tensors only");
    CHECK(out[0] == -1.0f);
    name_is_free(name);
  }
}

TEST_CASE("an out-of-place allreduce whose output is too small on one rank fails everywhere", "[refusal]") {
  for (int odd = 0; odd < size(); ++odd) {
    const std::string name = tag("out-of-place", odd);
    std::vector<float> in(8, 1.0f), out(rank() == odd ? 4 : 8, 0.0f);
    expect_refused(allreduce_async(TensorView::of(in), TensorView::of(out), name, {ReduceOp::kSum}), odd,
                   "cannot hold input");
    name_is_free(name);
  }
}

TEST_CASE("a negative dimension on one rank fails the allreduce on every rank", "[refusal]") {
  for (int odd = 0; odd < size(); ++odd) {
    const std::string name = tag("negative", odd);
    std::vector<float> v(4, 1.0f);
    const TensorView t = rank() == odd ? TensorView::of(v.data(), {2, -2}) : TensorView::of(v.data(), {2, 2});
    expect_refused(allreduce_async(t, name, {ReduceOp::kSum}), odd, "has a negative dimension");
    name_is_free(name);
  }
}

TEST_CASE("a bad member on one rank fails the whole group on every rank", "[refusal]") {
  for (int odd = 0; odd < size(); ++odd) {
    const std::string name = tag("group", odd);
    std::vector<float> a(3, 1.0f), b(5, 1.0f);
    const TensorView second = rank() == odd ? TensorView{nullptr, DType::kFloat32, {5}} : TensorView::of(b);
    Handle h = grouped_allreduce_async({TensorView::of(a), second}, name, {ReduceOp::kSum});
    const std::string m = wait_error(h, 60);
    INFO("rank " << rank() << ": " << m);
    CHECK_THAT(m, Catch::Contains("data pointer is null"));
    if (rank() != odd) CHECK_THAT(m, Catch::Contains("refused on rank " + std::to_string(odd)));
    CHECK(a[0] == 1.0f);
    // The group runs under its name again.
    wait_ok(grouped_allreduce_async({TensorView::of(a), TensorView::of(b)}, name, {ReduceOp::kSum}));
    CHECK(a[2] == static_cast<float>(size()));
    CHECK(b[4] == static_cast<float>(size()));
  }
}

TEST_CASE("a refusal of a name already negotiated (on the fast path's board) fails everywhere", "[refusal]") {
  for (int odd = 0; odd < size(); ++odd) {
    const std::string name = tag("known", odd);
    for (int i = 0; i < 3; ++i) name_is_free(name);  // cached, and on the board where there is one
    std::vector<float> v(6, 1.0f);
    const double pre = rank() == odd ? std::nan("") : 1.0;
    expect_refused(allreduce_async(TensorView::of(v), name, {ReduceOp::kSum, pre}), odd,
                   "scale factors must be finite");
    name_is_free(name);
    name_is_free(name);
  }
}

TEST_CASE("a broadcast root outside the process set on one member fails on every member", "[refusal]") {
  if (size() < 3) return;  // needs a rank outside the set
  ProcessSet pair = add_process_set({0, 1});
  if (rank() <= 1) {
    for (int odd = 0; odd <= 1; ++odd) {
      const std::string name = tag("set-root", odd);
      std::vector<float> v(4, static_cast<float>(rank()));
      expect_refused(broadcast_async(TensorView::of(v), rank() == odd ? 2 : 0, name, pair), odd,
                     "root 2 is not in");
      wait_ok(broadcast_async(TensorView::of(v), 1, name, pair));
      CHECK(v[3] == 1.0f);
    }
  }
  remove_process_set(pair);
  name_is_free("refuse.set-root.after");
}
