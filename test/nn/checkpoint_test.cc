// Checkpoints: round trip, resume equivalence, refusal of damaged or mismatched files, and
// that a failed write leaves the previous checkpoint intact.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "nn/checkpoint.h"
#include "nn/loss.h"
#include "nn/models.h"
#include "optimizer/optimizer.h"
#include "scratch_dir.h"

using namespace kolo::nn;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string& name) {
  return kolo::test::scratch_dir() / name;
}

struct Trainee {
  std::unique_ptr<Model> model;
  std::unique_ptr<kolo::Optimizer> opt;
  Tensor x;
  std::vector<int32_t> y;
  SoftmaxCrossEntropy loss;

  Trainee(const std::string& optimizer, uint64_t seed) {
    // A ResNet has BatchNorm buffers; dropout-free, so equality is exact.
    model = make_model("resnet20", {1, 10, 10}, 10, seed);
    if (optimizer == "sgd") opt = std::make_unique<kolo::SGD>(model->params(), kolo::SgdOptions{0.05, 0.9, 1e-4, true});
    else opt = std::make_unique<kolo::Adam>(model->params(), kolo::AdamOptions{1e-3, 0.9, 0.999, 1e-8, 1e-4, true});
  }
  // One training step on batch `b` (a deterministic function of b); returns its loss.
  double step(int b) {
    Rng r(1000 + static_cast<uint64_t>(b));
    x.resize({8, 1, 10, 10});
    for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(r.normal());
    y.resize(8);
    for (auto& v : y) v = static_cast<int32_t>(r.below(10));
    const double l = loss.forward(model->forward(x, true), y.data()).loss;
    opt->zero_grad();
    model->backward(x, loss.grad());
    opt->step();
    return l;
  }
  void save(const fs::path& p) {
    Checkpoint ck;
    save_model(ck, *model);
    kolo::save_optimizer(ck, *opt);
    ck.write_file(p.string());
  }
  void load(const fs::path& p) {
    const auto ck = Checkpoint::read_file(p.string());
    load_model(ck, *model);
    kolo::load_optimizer(ck, *opt);
  }
};

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

}  // namespace

TEST_CASE("Resuming gives the same next-step loss as the uninterrupted run", "[checkpoint]") {
  const std::string optimizer = GENERATE("sgd", "adamw");
  const auto path = temp_file("resume_" + optimizer + ".kolo");
  Trainee a(optimizer, 3);
  for (int b = 0; b < 3; ++b) a.step(b);
  a.save(path);
  const double uninterrupted = a.step(3);
  const double after = a.step(4);

  Trainee b(optimizer, 99);  // different initial weights: all must come from the file
  b.load(path);
  CHECK(b.opt->steps() == 3);
  CHECK(b.step(3) == uninterrupted);
  CHECK(b.step(4) == after);
  CHECK(std::equal(a.model->params().values().begin(), a.model->params().values().end(),
                   b.model->params().values().begin()));
  CHECK(std::equal(a.model->buffers().values().begin(), a.model->buffers().values().end(),
                   b.model->buffers().values().begin()));
}

TEST_CASE("Damaged checkpoints are refused with what is wrong", "[checkpoint][errors]") {
  const auto path = temp_file("damaged.kolo");
  Trainee t("sgd", 1);
  t.save(path);
  const auto good = read_bytes(path);
  SECTION("truncated") {
    write_bytes(path, {good.begin(), good.begin() + static_cast<long>(good.size() / 2)});
    CHECK_THROWS_WITH(Checkpoint::read_file(path.string()),
                      Catch::Contains(path.string()) && Catch::Contains("truncated: header says"));
  }
  SECTION("shorter than the header") {
    write_bytes(path, {good.begin(), good.begin() + 10});
    CHECK_THROWS_WITH(Checkpoint::read_file(path.string()), Catch::Contains("shorter than the 28-byte header"));
  }
  SECTION("one flipped byte") {
    auto bad = good;
    bad[bad.size() / 2] ^= 0x40;
    write_bytes(path, bad);
    CHECK_THROWS_WITH(Checkpoint::read_file(path.string()), Catch::Contains("checksum mismatch"));
  }
  SECTION("not a checkpoint") {
    write_bytes(path, std::vector<uint8_t>(100, 'x'));
    CHECK_THROWS_WITH(Checkpoint::read_file(path.string()), Catch::Contains("not a kolo checkpoint"));
  }
  SECTION("future version") {
    auto bad = good;
    bad[8] = 2;
    write_bytes(path, bad);
    CHECK_THROWS_WITH(Checkpoint::read_file(path.string()), Catch::Contains("format version 2 is not supported"));
  }
}

TEST_CASE("Checkpoints of another model or optimizer are refused", "[checkpoint][errors]") {
  const auto path = temp_file("other.kolo");
  Trainee t("sgd", 1);
  t.save(path);
  const auto ck = Checkpoint::read_file(path.string());
  auto lenet = make_model("lenet", {1, 16, 16}, 10, 1);
  CHECK_THROWS_WITH(load_model(ck, *lenet), Catch::Contains("checkpoint is for model resnet20") &&
                                                Catch::Contains("this run builds lenet"));
  auto wider = make_model("resnet20", {1, 10, 10}, 12, 1);
  CHECK_THROWS_WITH(load_model(ck, *wider), Catch::Contains("fc.weight [10,64]") &&
                                                Catch::Contains("fc.weight [12,64]"));
  kolo::Adam adam(t.model->params(), {});
  CHECK_THROWS_WITH(kolo::load_optimizer(ck, adam), Catch::Contains("holds sgd optimizer state"));
}

TEST_CASE("A failed write leaves the previous checkpoint intact", "[checkpoint]") {
  const auto path = temp_file("intact.kolo");
  Trainee t("sgd", 1);
  t.save(path);
  const auto before = read_bytes(path);
  // Make the temporary file impossible to create: a directory in its place.
  fs::create_directories(path.string() + ".tmp");
  t.step(0);
  CHECK_THROWS_WITH(t.save(path), Catch::Contains(".tmp: cannot create"));
  CHECK(read_bytes(path) == before);
  fs::remove_all(path.string() + ".tmp");
  t.save(path);  // and a later write succeeds and replaces it
  CHECK(read_bytes(path) != before);
  CHECK_FALSE(fs::exists(path.string() + ".tmp"));
}
