// Pins every bundled architecture's parameter and buffer layout (names, shapes, offsets, in
// order) against test/nn/data/model_layouts.txt. Checkpoints, gradient names and the GPU
// twin's layout check all depend on it, so a refactor of the builders that renames,
// reorders or reshapes a tensor fails here. The data file was written from the builders as
// they were before the architectures were shared between CPU and GPU (nn/architectures.h).
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "nn/models.h"

using namespace kolo::nn;

namespace {

// "<arch> param|buffer <name> <shape> <offset>", one line per tensor, in registration order.
std::vector<std::string> layout_lines(const std::string& arch, const Model& m) {
  std::vector<std::string> lines;
  const auto add = [&](const char* kind, const ParamStore& store) {
    for (const auto& p : store.infos()) {
      lines.push_back(arch + " " + kind + " " + p.name + " " + dims_string(p.shape) + " " +
                      std::to_string(p.offset));
    }
  };
  add("param", m.params());
  add("buffer", m.buffers());
  return lines;
}

// The data file's lines for `arch` (those starting with "<arch> ").
std::vector<std::string> pinned_lines(const std::string& arch) {
  std::ifstream in(KOLO_NN_TEST_DATA "/model_layouts.txt");
  REQUIRE(in.good());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(arch + " ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

size_t total_values(const ParamStore& store) {
  size_t n = 0;
  for (const auto& p : store.infos()) n += p.size;
  return n;
}

}  // namespace

TEST_CASE("Every architecture keeps its pinned parameter and buffer layout", "[models][layout]") {
  struct Case {
    const char* arch;
    Dims input;
    int classes;
    size_t params, values, buffers;
  };
  const Case cases[] = {
      {"lenet", {1, 28, 28}, 10, 10, 61706, 0},
      {"resnet20", {3, 32, 32}, 10, 65, 272474, 2 * 21},
      {"resnet56", {1, 28, 28}, 10, 173, 855482, 2 * 57},
      {"resnet50", {3, 224, 224}, 1000, 161, 25557032, 2 * 53},
  };
  for (const Case& c : cases) {
    INFO(c.arch);
    const auto m = make_model(c.arch, c.input, c.classes, 1);
    CHECK(m->params().count() == c.params);
    CHECK(total_values(m->params()) == c.values);
    CHECK(m->buffers().count() == c.buffers);
    const auto got = layout_lines(c.arch, *m);
    const auto want = pinned_lines(c.arch);
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
      INFO("tensor " << i);
      REQUIRE(got[i] == want[i]);
    }
    CHECK(got.size() == want.size());
  }
}
