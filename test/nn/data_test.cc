// IDX/CIFAR readers (including the errors for damaged files) and the sharded sampler.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "nn/data.h"
#include "nn/sampler.h"
#include "scratch_dir.h"

using namespace kolo::nn;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() { return kolo::test::scratch_dir(); }

std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                               const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b;
  auto be = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
  };
  be(magic);
  for (auto d : dims) be(d);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

void write_gz(const fs::path& p, const std::vector<uint8_t>& b) {
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f);
  REQUIRE(gzwrite(f, b.data(), static_cast<unsigned>(b.size())) == static_cast<int>(b.size()));
  gzclose(f);
}

void write_raw(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Three 2x2 images with pixel values i*10+j and labels 0, 7, 9.
void write_tiny_idx(const fs::path& dir) {
  std::vector<uint8_t> px;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) px.push_back(static_cast<uint8_t>(i * 10 + j));
  write_gz(dir / "train-images-idx3-ubyte.gz", idx_bytes(0x803, {3, 2, 2}, px));
  write_gz(dir / "train-labels-idx1-ubyte.gz", idx_bytes(0x801, {3}, {0, 7, 9}));
}

}  // namespace

TEST_CASE("IDX files load (gzip), with pixels scaled to [0,1]", "[data]") {
  const auto dir = temp_dir() / "idx_ok";
  fs::create_directories(dir);
  write_tiny_idx(dir);
  const Dataset d = load_mnist_dir(dir.string(), true);
  CHECK(d.size() == 3);
  CHECK(d.sample_shape == Dims{1, 2, 2});
  CHECK(d.labels == std::vector<int32_t>{0, 7, 9});
  CHECK(d.images[4 + 3] == Approx(13 / 255.0));
}

TEST_CASE("Damaged IDX files are refused naming the file and the defect", "[data][errors]") {
  const auto dir = temp_dir() / "idx_bad";
  fs::create_directories(dir);
  write_tiny_idx(dir);
  const auto images = (dir / "train-images-idx3-ubyte.gz").string();
  const auto labels = (dir / "train-labels-idx1-ubyte.gz").string();
  SECTION("missing file") {
    CHECK_THROWS_WITH(load_idx((dir / "nope.gz").string(), labels),
                      Catch::Contains("nope.gz: no such file"));
  }
  SECTION("bad magic") {
    write_gz(images, idx_bytes(0x1234, {3, 2, 2}, std::vector<uint8_t>(12)));
    CHECK_THROWS_WITH(load_idx(images, labels),
                      Catch::Contains(images) && Catch::Contains("bad IDX magic 0x00001234"));
  }
  SECTION("fewer pixels than the header promises") {
    write_gz(images, idx_bytes(0x803, {3, 2, 2}, std::vector<uint8_t>(10)));
    CHECK_THROWS_WITH(load_idx(images, labels),
                      Catch::Contains("promises 12 bytes of data but 10 follow (truncated)"));
  }
  SECTION("gzip stream cut short") {
    std::ifstream in(images, std::ios::binary);
    std::vector<uint8_t> gz((std::istreambuf_iterator<char>(in)), {});
    gz.resize(gz.size() / 2);
    write_raw(images, gz);
    CHECK_THROWS_WITH(load_idx(images, labels),
                      Catch::Contains(images) && Catch::Contains("truncated"));
  }
  SECTION("image and label counts disagree") {
    write_gz(labels, idx_bytes(0x801, {2}, {0, 1}));
    CHECK_THROWS_WITH(load_idx(images, labels), Catch::Contains("has 3 images but") &&
                                                    Catch::Contains("has 2 labels"));
  }
  SECTION("label out of range") {
    write_gz(labels, idx_bytes(0x801, {3}, {0, 12, 1}));
    CHECK_THROWS_WITH(load_idx(images, labels),
                      Catch::Contains("label 12 of item 1 is outside [0,10)"));
  }
}

TEST_CASE("CIFAR-10 batches: records load, bad sizes are refused", "[data]") {
  const auto dir = temp_dir() / "cifar";
  fs::create_directories(dir);
  std::vector<uint8_t> rec(2 * 3073, 128);
  rec[0] = 3;
  rec[3073] = 8;
  write_raw(dir / "test_batch.bin", rec);
  const Dataset d = load_cifar10_dir(dir.string(), false);
  CHECK(d.labels == std::vector<int32_t>{3, 8});
  CHECK(d.sample_shape == Dims{3, 32, 32});
  rec.pop_back();
  write_raw(dir / "test_batch.bin", rec);
  CHECK_THROWS_WITH(load_cifar10_dir(dir.string(), false),
                    Catch::Contains("not a positive multiple of the 3073-byte"));
}

TEST_CASE("Fashion-MNIST from the Debian package loads when installed", "[data][fashion]") {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/t10k-images-idx3-ubyte.gz")) {
    WARN("dataset-fashion-mnist not installed; skipped");
    return;
  }
  const Dataset d = load_mnist_dir(dir, false);
  CHECK(d.size() == 10000);
  CHECK(d.sample_shape == Dims{1, 28, 28});
}

TEST_CASE("Sampler: ranks' slices partition each global batch", "[sampler]") {
  const int64_t n = 1000;
  ShardedSampler one(n, 0, 1, 24, 9);
  ShardedSampler r0(n, 0, 2, 12, 9), r1(n, 1, 2, 12, 9);
  for (int epoch : {0, 3}) {
    one.set_epoch(epoch);
    r0.set_epoch(epoch);
    r1.set_epoch(epoch);
    CHECK(r0.batches_per_epoch() == 41);  // 1000 / 24, remainder of 16 skipped
    CHECK(r1.batches_per_epoch() == r0.batches_per_epoch());
    std::set<int64_t> seen;
    for (int64_t b = 0; b < r0.batches_per_epoch(); ++b) {
      auto a = r0.batch(b), c = r1.batch(b);
      a.insert(a.end(), c.begin(), c.end());
      CHECK(a == one.batch(b));  // np=2 x b == np=1 x 2b
      seen.insert(a.begin(), a.end());
    }
    CHECK(seen.size() == 41 * 24);  // no sample twice in an epoch
  }
  one.set_epoch(0);
  const auto e0 = one.batch(0);
  one.set_epoch(1);
  CHECK(one.batch(0) != e0);  // reshuffled per epoch
  ShardedSampler again(n, 0, 1, 24, 9);
  CHECK(again.batch(0) == e0);  // and deterministic
}

TEST_CASE("Sampler: keep_remainder cuts the last, smaller batch among the ranks", "[sampler]") {
  // 1000 samples, 3 ranks x 12: 27 full batches of 36 and a remainder of 28, cut 9/9/10.
  // 1010 samples, 4 ranks x 12: 21 full batches of 48 and a remainder of 2: ranks 1 and 3
  // get one sample each, ranks 0 and 2 none (they join one batch earlier).
  for (auto [n, size] : {std::pair<int64_t, int>{1000, 3}, std::pair<int64_t, int>{1010, 4}}) {
    std::set<int64_t> seen;
    int64_t most = 0, fewest = 1 << 30;
    for (int r = 0; r < size; ++r) {
      ShardedSampler s(n, r, size, 12, 5, true, {}, true);
      s.set_epoch(2);
      most = std::max(most, s.batches_per_epoch());
      fewest = std::min(fewest, s.batches_per_epoch());
      CHECK(s.max_batches_per_epoch() == n / (12 * size) + 1);
      for (int64_t b = 0; b < s.batches_per_epoch(); ++b) {
        auto idx = s.batch(b);
        seen.insert(idx.begin(), idx.end());
      }
      CHECK_THROWS(s.batch(s.batches_per_epoch()));
    }
    CHECK(static_cast<int64_t>(seen.size()) == n);  // every sample once per epoch
    CHECK(most == n / (12 * size) + 1);
    CHECK(fewest == (size == 4 ? most - 1 : most));
  }
}

TEST_CASE("Sampler: rank weights give proportional batches and gradient weights", "[sampler]") {
  ShardedSampler fast(1000, 0, 2, 30, 1, true, {2.0, 1.0});
  ShardedSampler slow(1000, 1, 2, 30, 1, true, {2.0, 1.0});
  CHECK(fast.local_batch_size() == 40);
  CHECK(slow.local_batch_size() == 20);
  // Every sample weighs the same in the averaged gradient, and the weights average to 1.
  CHECK(fast.local_weight() / 40 == Approx(slow.local_weight() / 20));
  CHECK((fast.local_weight() + slow.local_weight()) / 2 == Approx(1.0));
  CHECK(fast.local_weight() == Approx(4.0 / 3.0));
  CHECK_THROWS_WITH(ShardedSampler(1000, 0, 2, 30, 1, true, {1.0}),
                    Catch::Contains("1 rank weights given for 2 ranks"));
  CHECK_THROWS_WITH(ShardedSampler(10, 0, 1, 30, 1), Catch::Contains("smaller than one global batch"));
}

TEST_CASE("Evaluation shards cover the test set exactly once", "[sampler]") {
  for (int size : {1, 2, 3, 7}) {
    int64_t covered = 0, prev_end = 0;
    for (int r = 0; r < size; ++r) {
      int64_t b, e;
      eval_shard(10000, r, size, &b, &e);
      CHECK(b == prev_end);
      covered += e - b;
      prev_end = e;
    }
    CHECK(covered == 10000);
  }
}
