// Multi-rank tests of kolo::KVStore. Usage: kolo-kvstore-tests TYPE "[tag]" (Catch args).
// Every rank creates one store of TYPE; server ranks (the last KOLO_NUM_SERVERS) serve
// until the workers close it, workers run the Catch test cases (each uses the one store).
// The process exits non-zero on every rank if any worker saw a failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <type_traits>

#include "kolo/kolo.h"
#include "kolo/kvstore.h"

namespace {

kolo::KVStore* g_kv = nullptr;

// Linear regression on deterministic data: y = <true_w, x> + 0.5, loss 0.5*(pred-y)^2.
constexpr int kDim = 24;

void sample(int64_t i, float* x, float* y) {
  double t = 0.5;
  for (int j = 0; j < kDim; ++j) {
    x[j] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 0.11 * j + 0.05 * j * j));
    t += (0.1 * j - 1.0) * x[j];
  }
  *y = static_cast<float>(t);
}

// Mean gradient (and loss) of samples [first, first+count) at weights (w, b).
double gradient(const std::vector<float>& w, float b, int64_t first, int count, std::vector<float>* gw, float* gb) {
  gw->assign(kDim, 0.0f);
  *gb = 0;
  double loss = 0;
  float x[kDim], y;
  for (int64_t i = first; i < first + count; ++i) {
    sample(i, x, &y);
    float pred = b;
    for (int j = 0; j < kDim; ++j) pred += w[static_cast<size_t>(j)] * x[j];
    const float e = pred - y;
    loss += 0.5 * e * e;
    for (int j = 0; j < kDim; ++j) (*gw)[static_cast<size_t>(j)] += e * x[j] / static_cast<float>(count);
    *gb += e / static_cast<float>(count);
  }
  return loss / count;
}

kolo::KVOptimizer sgd(double rescale) {
  kolo::KVOptimizer o;
  o.learning_rate = 0.05;
  o.momentum = 0.9;
  o.wd = 1e-4;
  o.rescale_grad = rescale;
  return o;
}

// `steps` steps of the store with batch b per worker, on worker `rank` of `n`; returns the
// final weights (w..., b) as pulled.
// Keys k0 (weights) and k0+1 (bias): test cases share one store, so each has its own keys.
std::vector<float> train(kolo::KVStore& kv, int k0, int steps, int batch, std::vector<double>* losses = nullptr) {
  const int n = kv.num_workers(), r = kv.rank();
  std::vector<float> w(kDim, 0.0f), gw;
  float b = 0, gb = 0;
  for (int s = 0; s < steps; ++s) {
    const double loss = gradient(w, b, (static_cast<int64_t>(s) * n + r) * batch, batch, &gw, &gb);
    if (losses) losses->push_back(loss);
    kv.push({k0, k0 + 1}, {kolo::TensorView::of(gw), kolo::TensorView::of(&gb, {1})});
    kv.pull({k0, k0 + 1}, {kolo::TensorView::of(w), kolo::TensorView::of(&b, {1})});
  }
  w.push_back(b);
  return w;
}

// n workers with batch b (keys k0, k0+1 of the store, optimizer `o` with rescale 1/n) end
// where one worker with batch n*b (a local store, rescale 1) does, to 1e-5.
void check_equals_large_batch(kolo::KVStore& kv, int k0, kolo::KVOptimizer o) {
  const int n = kv.num_workers(), steps = 10, batch = 3;
  std::vector<float> w0(kDim, 0.0f), b0(1, 0.0f);
  kv.init({k0, k0 + 1}, {kolo::TensorView::of(w0), kolo::TensorView::of(b0)});
  o.rescale_grad = 1.0 / n;
  kv.set_optimizer(o);
  const std::vector<float> got = train(kv, k0, steps, batch);

  auto ref = kolo::KVStore::create("local");  // one worker, batch n*b, the same update rule
  ref->init({0, 1}, {kolo::TensorView::of(w0), kolo::TensorView::of(b0)});
  o.rescale_grad = 1.0;
  ref->set_optimizer(o);
  std::vector<float> w(kDim, 0.0f), gw;
  float b = 0, gb = 0;
  for (int s = 0; s < steps; ++s) {
    gradient(w, b, static_cast<int64_t>(s) * n * batch, n * batch, &gw, &gb);
    ref->push({0, 1}, {kolo::TensorView::of(gw), kolo::TensorView::of(&gb, {1})});
    ref->pull({0, 1}, {kolo::TensorView::of(w), kolo::TensorView::of(&b, {1})});
  }
  w.push_back(b);
  REQUIRE(got.size() == w.size());
  double moved = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(got[i] - w[i]) <= 1e-5 * std::max(1.0f, std::abs(w[i])));
    moved += std::abs(w[i]);
  }
  CHECK(moved > 0.1);  // the weights did change
}

}  // namespace

// dist_sync (any server count), allreduce: n workers with batch b == 1 worker with batch n*b.
TEST_CASE("n workers with batch b equal one worker with batch n*b", "[sync]") {
  check_equals_large_batch(*g_kv, 0, sgd(1.0));
}

// The same with the rate scheduled where the weights live (warm-up, then cosine decay to
// final_lr within the 10 steps, then final_lr): servers count updates as the local store does.
TEST_CASE("a scheduled rate keeps n workers with batch b equal to one with batch n*b", "[sync]") {
  kolo::KVOptimizer o = sgd(1.0);
  o.learning_rate = 0.1;
  o.lr_schedule = "cosine";
  o.warmup_updates = 3;
  o.warmup_begin_lr = 0.01;
  o.max_updates = 8;
  o.final_lr = 0.005;
  check_equals_large_batch(*g_kv, 60, o);
}

// Keys larger than one server's share (KOLO_KVSTORE_BIGARRAY_BOUND small), odd sizes.
TEST_CASE("keys split across servers keep every element", "[split]") {
  kolo::KVStore& kv = *g_kv;
  const std::vector<int64_t> sizes = {1, 17, 1001, 4096};
  std::vector<std::vector<float>> init(sizes.size()), grad(sizes.size()), out(sizes.size());
  std::vector<int> keys;
  std::vector<kolo::TensorView> iv, gv, ov;
  for (size_t k = 0; k < sizes.size(); ++k) {
    keys.push_back(static_cast<int>(10 + k));
    for (int64_t e = 0; e < sizes[k]; ++e) {
      init[k].push_back(static_cast<float>(e % 97));
      grad[k].push_back(static_cast<float>((e % 13) * (kv.rank() + 1)));
    }
    out[k].assign(static_cast<size_t>(sizes[k]), -1.0f);
    iv.push_back(kolo::TensorView::of(init[k]));
    gv.push_back(kolo::TensorView::of(grad[k]));
    ov.push_back(kolo::TensorView::of(out[k]));
  }
  kv.init(keys, iv);
  kv.pull(keys, ov);
  for (size_t k = 0; k < sizes.size(); ++k) REQUIRE(out[k] == init[k]);
  // SGD with rate -1 adds the sum of the workers' pushes to the weights.
  kolo::KVOptimizer add;
  add.learning_rate = -1.0;
  kv.set_optimizer(add);
  kv.pushpull(keys, gv, ov);
  const int n = kv.num_workers();
  const float workers_sum = static_cast<float>(n * (n + 1) / 2);
  for (size_t k = 0; k < sizes.size(); ++k)
    for (int64_t e = 0; e < sizes[k]; ++e) REQUIRE(out[k][static_cast<size_t>(e)] == init[k][static_cast<size_t>(e)] + static_cast<float>(e % 13) * workers_sum);
}

// dist_async: every push is applied exactly once (SGD with lr -1 adds each push).
// 16-bit keys travel in 16 bits (half a float32 key's bytes) and sum exactly in float32 on
// the servers; split across servers where KOLO_KVSTORE_BIGARRAY_BOUND is small.
float as_float(float x) { return x; }
float as_float(kolo::Half x) { return kolo::half_to_float(x); }
float as_float(kolo::BFloat16 x) { return kolo::bf16_to_float(x); }
template <class T>
T from_float(float x) {
  if constexpr (std::is_same_v<T, kolo::Half>) return kolo::float_to_half(x);
  else if constexpr (std::is_same_v<T, kolo::BFloat16>) return kolo::float_to_bf16(x);
  else return x;
}

template <class T>
void check_wire(kolo::KVStore& kv, int key, int64_t elements, int64_t wire_size) {
  const int n = kv.num_workers();
  std::vector<T> w(static_cast<size_t>(elements)), g(w.size()), out(w.size());
  for (size_t e = 0; e < w.size(); ++e) {
    w[e] = from_float<T>(static_cast<float>(e % 7));
    g[e] = from_float<T>(0.5f * static_cast<float>(kv.rank() + 1));
  }
  kv.init(key, kolo::TensorView::of(w));
  const int64_t before = kv.value_bytes_moved();
  kv.push(key, kolo::TensorView::of(g));
  kv.barrier();  // dist_async: every worker's push applied before anyone pulls
  kv.pull(key, kolo::TensorView::of(out));
  CHECK(kv.value_bytes_moved() - before == 2 * elements * wire_size);  // one push, one pull
  const float added = 0.5f * static_cast<float>(n * (n + 1) / 2);
  for (size_t e = 0; e < out.size(); ++e) {
    INFO("element " << e);
    REQUIRE(as_float(out[e]) == static_cast<float>(e % 7) + added);
  }
  kv.barrier();  // nobody sets the next optimizer while another still pulls
}

TEST_CASE("16-bit values travel in 16 bits to and from the servers", "[wire]") {
  kolo::KVStore& kv = *g_kv;
  kolo::KVOptimizer add;  // SGD at rate -1: the weights gain the sum of the pushes
  add.learning_rate = -1.0;
  kv.set_optimizer(add);
  check_wire<kolo::Half>(kv, 70, 1001, 2);
  check_wire<kolo::BFloat16>(kv, 71, 37, 2);
  check_wire<float>(kv, 72, 1001, 4);
}

TEST_CASE("dist_async applies every push exactly once", "[count]") {
  kolo::KVStore& kv = *g_kv;
  const int pushes = 200;
  std::vector<float> big(3000, 0.0f), small(5, 0.0f);
  kv.init({40, 41}, {kolo::TensorView::of(big), kolo::TensorView::of(small)});
  kolo::KVOptimizer add;
  add.learning_rate = -1.0;
  kv.set_optimizer(add);
  std::vector<float> gb(big.size()), gs(small.size());
  for (size_t e = 0; e < gb.size(); ++e) gb[e] = static_cast<float>(kv.rank() + 1 + e % 3);
  for (size_t e = 0; e < gs.size(); ++e) gs[e] = static_cast<float>(kv.rank() + 1);
  for (int i = 0; i < pushes; ++i) {
    kv.push({40, 41}, {kolo::TensorView::of(gb), kolo::TensorView::of(gs)});
    if (i % 17 == 0) kv.pull(41, kolo::TensorView::of(small));  // reads interleave with others' writes
  }
  kv.barrier();
  kv.pull({40, 41}, {kolo::TensorView::of(big), kolo::TensorView::of(small)});
  const int n = kv.num_workers();
  const double rank_sum = n * (n + 1) / 2.0;
  for (size_t e = 0; e < big.size(); ++e)
    REQUIRE(big[e] == static_cast<float>(pushes * (rank_sum + n * static_cast<double>(e % 3))));
  for (float v : small) REQUIRE(v == static_cast<float>(pushes * rank_sum));
}

// dist_async still trains: the loss falls.
TEST_CASE("dist_async converges on linear regression", "[converge]") {
  kolo::KVStore& kv = *g_kv;
  std::vector<float> w0(kDim, 0.0f), b0(1, 0.0f);
  kv.init({20, 21}, {kolo::TensorView::of(w0), kolo::TensorView::of(b0)});
  kolo::KVOptimizer o = sgd(1.0);
  o.learning_rate = 0.02;
  kv.set_optimizer(o);
  std::vector<double> losses;
  train(kv, 20, 300, 8, &losses);
  double first = 0, last = 0;
  for (int i = 0; i < 20; ++i) {
    first += losses[static_cast<size_t>(i)];
    last += losses[losses.size() - 1 - static_cast<size_t>(i)];
  }
  INFO("mean loss of the first 20 steps " << first / 20 << ", of the last 20 " << last / 20);
  CHECK(last < 0.05 * first);
}

// Bad input: clear errors naming the key, and the store still works afterwards.
TEST_CASE("mismatched shapes give clear errors", "[errors]") {
  kolo::KVStore& kv = *g_kv;
  std::vector<float> a(10, 1.0f), wrong(12, 1.0f);
  kv.init(3, kolo::TensorView::of(a));
  try {
    kv.push(3, kolo::TensorView::of(wrong));
    FAIL("push of a wrong shape succeeded");
  } catch (const kolo::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("key 3") && Catch::Contains("shape [12] but init gave [10]"));
  }
  try {
    kv.pull(99, kolo::TensorView::of(a));
    FAIL("pull of an unknown key succeeded");
  } catch (const kolo::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("key 99") && Catch::Contains("not initialised"));
  }
  std::vector<double> d(10, 1.0);
  CHECK_THROWS_WITH(kv.push(3, kolo::TensorView::of(d)), Catch::Contains("dtype float64"));
  CHECK_THROWS_WITH(kv.init(3, kolo::TensorView::of(a)), Catch::Contains("already initialised"));
  if (kv.num_servers() > 0) {
    // Workers disagree on a key's size at init: worker 0's init is stored; the others' pushes
    // of the other size are refused by the server holding the key, naming both sizes.
    std::vector<float> mine(kv.rank() == 0 ? 6 : 8, 1.0f);
    kv.init(4, kolo::TensorView::of(mine));
    if (kv.rank() != 0) {
      CHECK_THROWS_WITH(kv.push(4, kolo::TensorView::of(mine)),
                        Catch::Contains("key 4 was initialised with 6 elements but this request has 8"));
    }
    CHECK_THROWS_WITH(kv.set_updater([](int, int64_t, std::span<const float>, std::span<float>) {}),
                      Catch::Contains("cannot be sent to the servers"));
  }
  kv.barrier();
  kv.pull(3, kolo::TensorView::of(a));
  CHECK(a == std::vector<float>(10, 1.0f));
}

// Optimizer state saved by worker 0 and loaded back gives the same next steps.
TEST_CASE("optimizer state survives save and load", "[state]") {
  kolo::KVStore& kv = *g_kv;
  std::vector<float> w0(kDim, 0.0f), b0(1, 0.0f);
  kv.init({30, 31}, {kolo::TensorView::of(w0), kolo::TensorView::of(b0)});
  kv.set_optimizer(sgd(1.0 / kv.num_workers()));
  train(kv, 30, 3, 2);
  const std::string path = "kvstore_state_" + std::to_string(kolo::size()) + ".bin";
  kv.save_optimizer_states(path);
  std::vector<float> w(kDim), b(1);
  kv.pull({30, 31}, {kolo::TensorView::of(w), kolo::TensorView::of(b)});
  // One more step, then wipe the momentum (set_optimizer anew), load, and redo the step
  // from the same weights: the result must be the same.
  std::vector<float> gw(kDim, 0.25f), gb(1, -0.5f), after1(kDim), after2(kDim);
  kv.push(30, kolo::TensorView::of(gw));
  kv.pull(30, kolo::TensorView::of(after1));
  kv.set_optimizer(sgd(1.0 / kv.num_workers()));
  kv.load_optimizer_states(path);
  // Put the weights back with a store-only rule: push the difference with an lr=-1 optimizer
  // would change state, so compare momentum effects through a second step instead.
  kv.push(30, kolo::TensorView::of(gw));
  kv.pull(30, kolo::TensorView::of(after2));
  // With the loaded momentum m, both steps apply m' = 0.9 m - lr g from the same m: the
  // weight moves by the same amount in both steps.
  for (int j = 0; j < kDim; ++j) {
    const float d1 = after1[static_cast<size_t>(j)] - w[static_cast<size_t>(j)];
    const float d2 = after2[static_cast<size_t>(j)] - after1[static_cast<size_t>(j)];
    INFO("element " << j);
    CHECK(std::abs(d1 - d2) <= 1e-5f * std::max(1.0f, std::abs(d1)) + 1e-6f);
  }
  kv.barrier();
  if (kv.rank() == 0) std::remove(path.c_str());
  CHECK_THROWS_WITH(kv.load_optimizer_states("/nonexistent/kv.bin"), Catch::Contains("cannot read"));
}

// A worker that never set an optimizer (the "allreduce" type keeps one per worker): save and
// load fail on every worker, naming it, instead of that worker throwing alone while the others
// wait for it in the agreement. Nothing is written.
TEST_CASE("a worker without an optimizer fails save and load on every worker", "[state]") {
  if (g_kv->num_servers() > 0 || g_kv->num_workers() < 2) return;  // the dist types check on the servers
  auto kv = kolo::KVStore::create("allreduce");
  std::vector<float> w(4, 0.0f);
  kv->init(80, kolo::TensorView::of(w));
  const int odd = kv->num_workers() - 1;
  if (kv->rank() != odd) kv->set_optimizer(sgd(1.0));
  const std::string path = "kvstore_no_opt_" + std::to_string(kolo::size()) + ".bin";
  const std::string why = "no optimizer (set_optimizer first)";
  const std::string from = kv->rank() == odd ? "" : "(reported by worker " + std::to_string(odd) + ")";
  CHECK_THROWS_WITH(kv->save_optimizer_states(path), Catch::Contains("save_optimizer_states: " + why) && Catch::Contains(from));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  CHECK(f == nullptr);  // worker 0 wrote nothing
  if (f) {
    std::fclose(f);
    kv->barrier();
    if (kv->rank() == 0) std::remove(path.c_str());
  }
  // Load: worker 0 cannot read the file, worker `odd` has no optimizer; each says its own
  // reason, the others the lowest failing worker's (0).
  const std::string load_why = kv->rank() == odd ? why : kv->rank() == 0 ? "cannot read" : "(reported by worker 0)";
  CHECK_THROWS_WITH(kv->load_optimizer_states(path), Catch::Contains(load_why));
  // The store still works on every worker.
  kv->set_optimizer(sgd(1.0));
  std::vector<float> g(4, 1.0f);
  kv->push(80, kolo::TensorView::of(g));
  kv->pull(80, kolo::TensorView::of(w));
  CHECK(w[0] != 0.0f);
  kv->close();
}

// The session-8 audit (docs/correctness.md): keys of 0 elements next to ordinary ones, and
// corrupt optimizer-state files (truncated, garbage, empty, another optimizer): a clear error
// on every worker, and the state in the store untouched (the next step moves the weights as
// it would have without the failed load).
TEST_CASE("audit: empty keys work; a corrupt optimizer-state file is refused and loses nothing", "[audit]") {
  kolo::KVStore& kv = *g_kv;
  std::vector<float> none, w(kDim, 1.0f), b(1, 0.0f);
  kv.init({50, 51, 52}, {kolo::TensorView::of(none), kolo::TensorView::of(w), kolo::TensorView::of(b)});
  kv.set_optimizer(sgd(1.0 / kv.num_workers()));
  std::vector<float> gw(kDim, 0.5f), gb(1, 1.0f);
  // Empty key alone, then with the others in one call: nothing to move, nothing fails.
  kv.push(50, kolo::TensorView::of(none));
  kv.pull(50, kolo::TensorView::of(none));
  kv.pushpull({50, 51, 52}, {kolo::TensorView::of(none), kolo::TensorView::of(gw), kolo::TensorView::of(gb)},
              {kolo::TensorView::of(none), kolo::TensorView::of(w), kolo::TensorView::of(b)});
  const std::string good = "kvstore_audit_" + std::to_string(kolo::size()) + ".bin";
  kv.save_optimizer_states(good);
  // Corrupt copies, written by worker 0 (the one that reads them).
  std::vector<std::string> bad;
  for (const char* kind : {"truncated", "garbage", "empty", "one-slice-wrong"}) bad.push_back(good + "." + kind);
  if (kv.rank() == 0) {
    std::FILE* f = std::fopen(good.c_str(), "rb");
    REQUIRE(f != nullptr);
    std::vector<char> bytes(1 << 16);
    bytes.resize(std::fread(bytes.data(), 1, bytes.size(), f));
    std::fclose(f);
    REQUIRE(bytes.size() > 16);
    auto write = [](const std::string& path, const char* p, size_t n) {
      std::FILE* o = std::fopen(path.c_str(), "wb");
      REQUIRE(o != nullptr);
      if (n > 0) std::fwrite(p, 1, n, o);  // fwrite's pointer must not be null, even for 0 bytes
      std::fclose(o);
    };
    write(bad[0], bytes.data(), bytes.size() - 7);
    std::vector<char> junk(bytes.size());
    for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>(i * 131 + 7);
    write(bad[1], junk.data(), junk.size());
    write(bad[2], nullptr, 0);
    // Well-formed, but one record does not fit: key 51's first 12 elements (a slice of its
    // own with two servers and KOLO_KVSTORE_BIGARRAY_BOUND=16) are right, the slice at
    // element 12 has 5 values. A server that owns only the first would load it alone.
    std::vector<char> rec;
    auto put = [&](const auto& v) {
      const char* q = reinterpret_cast<const char*>(&v);
      rec.insert(rec.end(), q, q + sizeof(v));
    };
    auto floats = [&](size_t n, float x) {
      put(static_cast<uint64_t>(n));
      for (size_t i = 0; i < n; ++i) put(x);
    };
    put(uint32_t{0x4b565331});  // kvstore/updater.cc's magic
    put(uint64_t{3});
    rec.insert(rec.end(), {'s', 'g', 'd'});
    put(uint64_t{2});
    for (auto [offset, n] : {std::pair<int64_t, size_t>{0, 12}, std::pair<int64_t, size_t>{12, 5}}) {
      put(int32_t{51});
      put(offset);
      put(int64_t{1});
      floats(n, 1.0f);
      floats(0, 0.0f);
    }
    write(bad[3], rec.data(), rec.size());
  }
  kv.barrier();
  // The step the saved state gives: load the good file, take one step, note how w moved.
  std::vector<float> w0(kDim), w1(kDim);
  kv.load_optimizer_states(good);
  kv.pull(51, kolo::TensorView::of(w0));
  kv.push(51, kolo::TensorView::of(gw));
  kv.pull(51, kolo::TensorView::of(w1));
  for (size_t k = 0; k < bad.size(); ++k) {
    INFO("file " << bad[k]);
    // Back to the saved state, then a corrupt load: refused on every worker.
    kv.load_optimizer_states(good);
    std::vector<float> before(kDim), after(kDim);
    kv.pull(51, kolo::TensorView::of(before));
    if (k == 2) {
      // An empty file holds no state: loading it changes nothing (and is not an error).
      kv.load_optimizer_states(bad[k]);
    } else {
      CHECK_THROWS_WITH(kv.load_optimizer_states(bad[k]), Catch::Contains("optimizer state") &&
                                                             (Catch::Contains("truncated or corrupt") ||
                                                              Catch::Contains("bad magic") ||
                                                              Catch::Contains("in the file (saved with another key size")));
    }
    // Nothing lost: the momentum is the saved one, so the step moves w as it did above.
    kv.push(51, kolo::TensorView::of(gw));
    kv.pull(51, kolo::TensorView::of(after));
    for (int j = 0; j < kDim; ++j) {
      const size_t i = static_cast<size_t>(j);
      CHECK(std::abs((after[i] - before[i]) - (w1[i] - w0[i])) <= 1e-5f);
    }
  }
  kv.barrier();
  if (kv.rank() == 0)
    for (const std::string& p : {good, bad[0], bad[1], bad[2], bad[3]}) std::remove(p.c_str());
}

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TYPE [catch args]\n", argv[0]);
    return 2;
  }
  const std::string type = argv[1];
  int failed = 0;
  {
    auto kv = kolo::KVStore::create(type);
    if (kv->is_server()) {
      kv->run_server();
    } else {
      g_kv = kv.get();
      argv[1] = argv[0];
      failed = Catch::Session().run(argc - 1, argv + 1) != 0 ? 1 : 0;
      kv->close();
    }
  }
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (kolo::rank() == 0)
    std::printf("kolo kvstore suite (%s): %s on %d ranks\n", type.c_str(), any_failed ? "FAILED" : "passed",
                kolo::size());
  kolo::shutdown();
  return any_failed;
}
