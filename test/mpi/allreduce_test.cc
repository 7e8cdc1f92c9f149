// Allreduce across ranks: every dtype x reduce op x size (0, 1, odd, above the fusion
// threshold), scale factors, hundreds of tensors at once from one thread and from several.
#include <thread>

#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

struct Case {
  std::string name;
  DType dtype;
  ReduceOp op;
  size_t count;
  double prescale = 1.0, postscale = 1.0;
  uint64_t seed = 0;
};

Buffer make_input(const Case& c) {
  Buffer b(c.dtype, c.count);
  for (size_t i = 0; i < c.count; ++i) b.put(i, input_value(c.seed, rank(), i, c.dtype, c.op));
  return b;
}

void check_result(const Case& c, const Buffer& b) {
  size_t wrong = 0, first_wrong = 0;
  for (size_t i = 0; i < c.count; ++i) {
    double want = expected_allreduce(c.seed, size(), i, c.dtype, c.op, c.prescale, c.postscale);
    if (std::abs(b.at(i) - want) > tolerance(c.dtype, want)) {
      if (!wrong) first_wrong = i;
      ++wrong;
    }
  }
  INFO(c.name << ": element " << first_wrong << " is " << (c.count ? b.at(first_wrong) : 0.0) << ", expected "
              << expected_allreduce(c.seed, size(), first_wrong, c.dtype, c.op, c.prescale, c.postscale));
  CHECK(wrong == 0);
}

// Submits every case at once (so the coordinator fuses what it can), then checks them all.
void run_cases(const std::vector<Case>& cases) {
  std::vector<Buffer> bufs;
  std::vector<Handle> handles;
  bufs.reserve(cases.size());
  for (const Case& c : cases) {
    bufs.push_back(make_input(c));
    handles.push_back(allreduce_async(bufs.back().view(), c.name, {c.op, c.prescale, c.postscale}));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].name);
    wait_ok(handles[i]);
    check_result(cases[i], bufs[i]);
  }
}

}  // namespace

TEST_CASE("allreduce: every dtype x reduce op x size", "[allreduce]") {
  std::vector<Case> cases;
  for (DType t : all_dtypes())
    for (ReduceOp op : all_reduce_ops())
      for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}, size_t{150001}})
        cases.push_back({"grid." + std::string(dtype_name(t)) + "." + std::string(reduce_op_name(op)) + "." +
                             std::to_string(n),
                         t, op, n, 1.0, 1.0, n + static_cast<uint64_t>(op)});
  run_cases(cases);
}

TEST_CASE("allreduce: prescale and postscale on floats and integers", "[allreduce]") {
  std::vector<Case> cases;
  for (DType t : all_dtypes()) {
    const bool fl = is_floating(t);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax})
      cases.push_back({"scaled." + std::string(dtype_name(t)) + "." + std::string(reduce_op_name(op)), t, op, 333,
                       fl ? 0.5 : 2.0, fl ? 3.0 : 0.5, 5});
  }
  run_cases(cases);
}

TEST_CASE("allreduce: blocking form, one tensor at a time", "[allreduce]") {
  for (DType t : {DType::kFloat32, DType::kInt64, DType::kFloat16}) {
    Case c{"blocking." + std::string(dtype_name(t)), t, ReduceOp::kSum, 4099, 1.0, 1.0, 9};
    Buffer b = make_input(c);
    allreduce(b.view(), c.name, {ReduceOp::kSum});
    check_result(c, b);
  }
}

TEST_CASE("allreduce: 600 tensors submitted at once from one thread", "[allreduce][many]") {
  std::vector<Case> cases;
  for (int i = 0; i < 600; ++i)
    cases.push_back({"many." + std::to_string(i), i % 3 ? DType::kFloat32 : DType::kFloat64,
                     i % 5 ? ReduceOp::kAverage : ReduceOp::kSum, static_cast<size_t>(1 + (i * 37) % 3000), 1.0, 1.0,
                     static_cast<uint64_t>(i)});
  run_cases(cases);
}

TEST_CASE("allreduce: 4 threads submit 150 tensors each concurrently", "[allreduce][many]") {
  constexpr int kThreads = 4, kPer = 150;
  std::vector<std::vector<Case>> cases(kThreads);
  std::vector<std::vector<Buffer>> bufs(kThreads);
  std::vector<std::vector<Handle>> handles(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPer; ++i)
      cases[t].push_back({"threads." + std::to_string(t) + "." + std::to_string(i), DType::kFloat32, ReduceOp::kSum,
                          static_cast<size_t>(1 + (i * 131 + t) % 2000), 1.0, 1.0,
                          static_cast<uint64_t>(t * 1000 + i)});
    bufs[t].reserve(kPer);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread submits in its own order; names still match across ranks.
      for (int i = 0; i < kPer; ++i) {
        const Case& c = cases[t][static_cast<size_t>(i)];
        bufs[t].push_back(make_input(c));
        handles[t].push_back(allreduce_async(bufs[t].back().view(), c.name, {c.op}));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kPer; ++i) {
      wait_ok(handles[t][static_cast<size_t>(i)]);
      check_result(cases[t][static_cast<size_t>(i)], bufs[t][static_cast<size_t>(i)]);
    }
}

TEST_CASE("allreduce: the same name may be reused once its collective completed", "[allreduce]") {
  for (int step = 0; step < 20; ++step) {
    Case c{"reused.grad", DType::kFloat32, ReduceOp::kAverage, 64, 1.0, 1.0, static_cast<uint64_t>(step)};
    Buffer b = make_input(c);
    wait_ok(allreduce_async(b.view(), c.name, {c.op}));
    check_result(c, b);
  }
}
