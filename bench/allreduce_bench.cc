// kolo-bench-allreduce — collectives through kolo beside raw MPI on the same buffers, in the
// same run, in the table users of nccl-tests know.
//
// Sweep mode (default): sizes from --min-bytes to --max-bytes (x --factor); per size: time
// (us), algbw and busbw (GB/s), wrong elements (results are checked), then the MPI baseline
// and the ratio kolo/MPI (median times). Sizes are per-rank input bytes; for allgather
// algbw counts the gathered output (size x ranks).
// Workload mode (--workload resnet50|resnet20|lenet|bert-base|tiny): every gradient of a
// model submitted as its own named tensor each step, beside (a) one MPI_Allreduce per tensor
// and (b) one MPI_Allreduce of all bytes in one buffer; plus the coordinator's overhead.
// --dtype float16|bfloat16 keeps kolo's gradients in 16 bits (the MPI baselines stay float32).
//   mpirun -np 2 build/bench/kolo-bench-allreduce --max-bytes 64M --csv out.csv
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "floor.h"
#include "kolo/kolo.h"
#include "workloads.h"

namespace {

using kolo::bench::Stats;

struct Options {
  std::string op = "allreduce", dtype = "float32", reduce = "sum", workload, csv, json;
  size_t min_bytes = 4, max_bytes = 64u << 20;
  int factor = 4, warmup = 3, iters = 20;
};

struct Row {
  size_t bytes = 0, count = 0;
  Stats kolo, mpi;
  double copy_us = 0;  // the floor's copy term (bench/floor.h)
  size_t kolo_wrong = 0, mpi_wrong = 0;
};

const std::map<std::string, kolo::DType> kDTypes = {
    {"uint8", kolo::DType::kUInt8},     {"int32", kolo::DType::kInt32},       {"int64", kolo::DType::kInt64},
    {"float16", kolo::DType::kFloat16}, {"bfloat16", kolo::DType::kBFloat16}, {"float32", kolo::DType::kFloat32},
    {"float64", kolo::DType::kFloat64}};
const std::map<std::string, kolo::ReduceOp> kOps = {{"sum", kolo::ReduceOp::kSum},
                                                    {"average", kolo::ReduceOp::kAverage},
                                                    {"min", kolo::ReduceOp::kMin},
                                                    {"max", kolo::ReduceOp::kMax},
                                                    {"product", kolo::ReduceOp::kProduct}};

double get(const void* p, kolo::DType t, size_t i) {
  using kolo::DType;
  switch (t) {
    case DType::kUInt8: return static_cast<const uint8_t*>(p)[i];
    case DType::kInt32: return static_cast<const int32_t*>(p)[i];
    case DType::kInt64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::kFloat16: return kolo::half_to_float(static_cast<const kolo::Half*>(p)[i]);
    case DType::kBFloat16: return kolo::bf16_to_float(static_cast<const kolo::BFloat16*>(p)[i]);
    case DType::kFloat32: return static_cast<const float*>(p)[i];
    case DType::kFloat64: return static_cast<const double*>(p)[i];
  }
  return 0;
}

void put(std::vector<std::byte>& b, kolo::DType t, size_t i, double v) {
  using kolo::DType;
  void* p = b.data();
  switch (t) {
    case DType::kUInt8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
    case DType::kInt32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DType::kInt64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DType::kFloat16: static_cast<kolo::Half*>(p)[i] = kolo::float_to_half(static_cast<float>(v)); break;
    case DType::kBFloat16: static_cast<kolo::BFloat16*>(p)[i] = kolo::float_to_bf16(static_cast<float>(v)); break;
    case DType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double*>(p)[i] = v; break;
  }
}

MPI_Datatype mpi_type(kolo::DType t) {
  switch (t) {
    case kolo::DType::kUInt8: return MPI_UINT8_T;
    case kolo::DType::kInt32: return MPI_INT32_T;
    case kolo::DType::kInt64: return MPI_INT64_T;
    case kolo::DType::kFloat32: return MPI_FLOAT;
    case kolo::DType::kFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;  // 16-bit floats: MPI has no arithmetic for them
  }
}

MPI_Op mpi_op(kolo::ReduceOp op) {
  switch (op) {
    case kolo::ReduceOp::kMin: return MPI_MIN;
    case kolo::ReduceOp::kMax: return MPI_MAX;
    case kolo::ReduceOp::kProduct: return MPI_PROD;
    default: return MPI_SUM;
  }
}

// One collective over one buffer, through kolo or through MPI; and how to check it.
class Case {
 public:
  Case(const Options& o, size_t bytes) : o_(o), t_(kDTypes.at(o.dtype)), op_(kOps.at(o.reduce)) {
    n_ = std::max<size_t>(1, bytes / kolo::dtype_size(t_));
    in_.resize(n_ * kolo::dtype_size(t_));
    if (o.op == "allgather") out_.resize(in_.size() * static_cast<size_t>(kolo::size()));
  }
  size_t count() const { return n_; }
  bool mpi_supported() const { return mpi_type(t_) != MPI_DATATYPE_NULL || o_.op == "broadcast"; }

  void fill() {
    const int r = kolo::rank();
    for (size_t i = 0; i < n_; ++i) {
      double v = o_.op == "allreduce" ? static_cast<double>(i % 7 + static_cast<size_t>(r))
                 : o_.op == "broadcast" ? (r == 0 ? static_cast<double>(i % 251) : 0.0)
                                        : static_cast<double>((static_cast<size_t>(r) * 13 + i) % 251);
      put(in_, t_, i, v);
    }
  }
  void run_kolo() {
    kolo::TensorView v{in_.data(), t_, {static_cast<int64_t>(n_)}};
    if (o_.op == "allreduce") kolo::allreduce(v, "bench", {op_});
    else if (o_.op == "broadcast") kolo::broadcast(v, 0, "bench");
    else gathered_ = kolo::allgather(v, "bench");
  }
  void run_mpi() {
    const int n = static_cast<int>(n_);
    if (o_.op == "allreduce") MPI_Allreduce(MPI_IN_PLACE, in_.data(), n, mpi_type(t_), mpi_op(op_), MPI_COMM_WORLD);
    else if (o_.op == "broadcast") MPI_Bcast(in_.data(), static_cast<int>(in_.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
    else MPI_Allgather(in_.data(), n, mpi_type(t_), out_.data(), n, mpi_type(t_), MPI_COMM_WORLD);
  }
  // Elements that differ from the exact answer after one fill() + run.
  size_t wrong(bool from_kolo) const {
    const int size = kolo::size();
    size_t bad = 0;
    if (o_.op == "allgather") {
      const std::byte* src = from_kolo ? gathered_.bytes.data() : out_.data();
      for (size_t r = 0; r < static_cast<size_t>(size); ++r)
        for (size_t i = 0; i < n_; ++i) bad += get(src, t_, r * n_ + i) != static_cast<double>((r * 13 + i) % 251);
      return bad;
    }
    for (size_t i = 0; i < n_; ++i) bad += std::abs(get(in_.data(), t_, i) - expected(i, size)) > 1e-2 * (1 + i % 7);
    return bad;
  }

 private:
  double expected(size_t i, int size) const {
    if (o_.op == "broadcast") return static_cast<double>(i % 251);
    const double base = static_cast<double>(i % 7);
    double sum = base * size + size * (size - 1) / 2.0;
    switch (op_) {
      case kolo::ReduceOp::kMin: return base;
      case kolo::ReduceOp::kMax: return base + size - 1;
      case kolo::ReduceOp::kAverage: return kolo::is_floating(t_) ? sum / size : std::trunc(sum / size);
      case kolo::ReduceOp::kProduct: {
        double p = 1;
        for (int r = 0; r < size; ++r) p *= base + r;
        return p;
      }
      default: return sum;
    }
  }
  const Options& o_;
  kolo::DType t_;
  kolo::ReduceOp op_;
  size_t n_ = 0;
  std::vector<std::byte> in_, out_;
  kolo::Tensor gathered_;
};

double bus_factor(const std::string& op, int n) {
  if (op == "allreduce") return 2.0 * (n - 1) / n;
  if (op == "allgather") return static_cast<double>(n - 1) / n;
  return 1.0;
}

std::vector<Row> sweep(const Options& o) {
  std::vector<Row> rows;
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= static_cast<size_t>(o.factor)) {
    Case c(o, bytes);
    Row row;
    row.bytes = c.count() * kolo::dtype_size(kDTypes.at(o.dtype));
    row.count = c.count();
    const bool with_mpi = c.mpi_supported();
    const int iters = std::max(3, static_cast<int>(o.iters * std::min<size_t>(64, (64u << 20) / row.bytes + 1) / 8));
    std::vector<std::function<void()>> bodies = {[&] { c.run_kolo(); }};
    if (with_mpi) bodies.push_back([&] { c.run_mpi(); });
    auto st = kolo::bench::measure(o.warmup, iters, bodies, [&](size_t) { c.fill(); });
    row.kolo = st[0];
    if (with_mpi) row.mpi = st[1];
    c.fill();
    c.run_kolo();
    row.kolo_wrong = c.wrong(true);
    if (with_mpi) {
      c.fill();
      c.run_mpi();
      row.mpi_wrong = c.wrong(false);
    }
    row.copy_us = kolo::bench::copy_us(row.bytes);
    rows.push_back(row);
    if (o.factor <= 1) break;
  }
  return rows;
}

void print_sweep(const Options& o, const std::vector<Row>& rows, const kolo::bench::Floor& fl) {
  const int n = kolo::size();
  std::printf("# kolo-bench-allreduce: op %s, dtype %s, reduce %s, %d ranks (times are medians)\n", o.op.c_str(),
              o.dtype.c_str(), o.reduce.c_str(), n);
  std::printf("# floor(us) = max(a cache line one way between two cores: %.3f us (ping-pong, median), one "
              "warm copy of the buffer by every rank at once)\n",
              fl.one_way_us);
  std::printf("#%12s %12s | %11s %8s %8s %7s | %11s %8s %8s %7s | %9s | %9s\n", "size(B)", "count", "kolo(us)",
              "algbw", "busbw", "#wrong", "mpi(us)", "algbw", "busbw", "#wrong", "kolo/mpi", "floor(us)");
  const double mult = o.op == "allgather" ? n : 1.0;
  for (const Row& r : rows) {
    auto bw = [&](double ms) { return ms > 0 ? r.bytes * mult / (ms * 1e-3) / 1e9 : 0.0; };
    std::printf(" %12zu %12zu | %11.1f %8.3f %8.3f %7zu | %11.1f %8.3f %8.3f %7zu | %9.2f | %9.2f\n", r.bytes, r.count,
                r.kolo.median_ms * 1e3, bw(r.kolo.median_ms), bw(r.kolo.median_ms) * bus_factor(o.op, n),
                r.kolo_wrong, r.mpi.median_ms * 1e3, bw(r.mpi.median_ms), bw(r.mpi.median_ms) * bus_factor(o.op, n),
                r.mpi_wrong, r.mpi.median_ms > 0 ? r.kolo.median_ms / r.mpi.median_ms : 0.0, std::max(fl.one_way_us, r.copy_us));
  }
}

}  // namespace

int run_workload_mode(const std::string& name, int warmup, int iters, kolo::DType dtype);  // workload_bench.cc
void reserve_workload_shared_memory(const std::string& name);            // workload_bench.cc

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"kolo collectives beside raw MPI, in the same run"};
  app.add_option("--op", o.op, "allreduce | broadcast | allgather")->check(CLI::IsMember({"allreduce", "broadcast", "allgather"}));
  app.add_option("--dtype", o.dtype, "element type")->check(CLI::IsMember({"uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"}));
  app.add_option("--reduce", o.reduce, "reduce op")->check(CLI::IsMember({"sum", "average", "min", "max", "product"}));
  app.add_option("--min-bytes", o.min_bytes, "smallest size")->transform(CLI::AsSizeValue(false));
  app.add_option("--max-bytes", o.max_bytes, "largest size")->transform(CLI::AsSizeValue(false));
  app.add_option("--factor", o.factor, "size multiplier per row")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "untimed rounds")->check(CLI::NonNegativeNumber);
  app.add_option("--iters", o.iters, "timed rounds (scaled up for small sizes)")->check(CLI::PositiveNumber);
  app.add_option("--workload", o.workload, "lenet | resnet20 | resnet50 | bert-base | tiny")
      ->check(CLI::IsMember({"lenet", "resnet20", "resnet50", "bert-base", "tiny"}));
  app.add_option("--csv", o.csv, "also write rows as CSV here");
  app.add_option("--json", o.json, "also write rows as JSON here");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!o.workload.empty() && o.dtype != "float32" && o.dtype != "float16" && o.dtype != "bfloat16") {
    std::fprintf(stderr, "--workload takes --dtype float32, float16 or bfloat16 (gradients), not %s\n", o.dtype.c_str());
    return 2;
  }
  if (!o.workload.empty()) reserve_workload_shared_memory(o.workload);
  // On the Gloo backend (docs/gloo.md) kolo makes no MPI call: the benchmark starts MPI for
  // its own barriers and MPI baselines.
  const char* backend = std::getenv("KOLO_BACKEND");
  const bool own_mpi = backend != nullptr && std::string(backend) == "gloo";
  if (own_mpi) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  }
  kolo::init(&argc, &argv);
  int rc = 0;
  if (!o.workload.empty()) {
    rc = run_workload_mode(o.workload, o.warmup, o.iters, kDTypes.at(o.dtype));
  } else {
    const auto floor = kolo::bench::measure_floor();
    auto rows = sweep(o);
    if (kolo::rank() == 0) {
      print_sweep(o, rows, floor);
      if (!o.csv.empty()) {
        std::ofstream f(o.csv);
        f << "op,dtype,reduce,ranks,bytes,count,kolo_us,mpi_us,kolo_wrong,mpi_wrong,ratio\n";
        for (const Row& r : rows)
          f << o.op << ',' << o.dtype << ',' << o.reduce << ',' << kolo::size() << ',' << r.bytes << ',' << r.count
            << ',' << r.kolo.median_ms * 1e3 << ',' << r.mpi.median_ms * 1e3 << ',' << r.kolo_wrong << ','
            << r.mpi_wrong << ',' << (r.mpi.median_ms > 0 ? r.kolo.median_ms / r.mpi.median_ms : 0) << '\n';
      }
      if (!o.json.empty()) {
        std::ofstream f(o.json);
        f << "[\n";
        for (size_t i = 0; i < rows.size(); ++i)
          f << "  {\"op\": \"" << o.op << "\", \"dtype\": \"" << o.dtype << "\", \"bytes\": " << rows[i].bytes
            << ", \"kolo_us\": " << rows[i].kolo.median_ms * 1e3 << ", \"mpi_us\": " << rows[i].mpi.median_ms * 1e3
            << ", \"kolo_wrong\": " << rows[i].kolo_wrong << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
        f << "]\n";
      }
    }
    for (const Row& r : rows) rc |= (r.kolo_wrong || r.mpi_wrong) ? 2 : 0;
  }
  kolo::shutdown();
  if (own_mpi) MPI_Finalize();
  return rc;
}
