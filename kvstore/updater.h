// kvstore/updater.h — the store's built-in optimizer (KVOptimizer: MXNet's SGD and Adam) and
// its state, kept per slice of a key (key, offset), wherever those weights live: on the
// worker ("local", "allreduce") or on the server that holds the slice (dist types).
// Thread safety: none; the one thread that owns the store (or the server loop) calls it.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kolo/kvstore.h"
#include "kolo/status.h"

namespace kolo::kv {

// Ok, or an invalid_argument naming the field (unknown kind, negative rate, ...).
Status validate(const KVOptimizer& o);
// validate(), and lookahead only for a store of type "dist_async" (where pulls race pushes).
Status validate_for(const KVOptimizer& o, const std::string& store_type);
// The rate of update number u (1 for a slice's first) under o's schedule (KVOptimizer).
double learning_rate_at(const KVOptimizer& o, int64_t u);
std::vector<uint8_t> encode(const KVOptimizer& o);
Status decode(const uint8_t* p, size_t n, KVOptimizer* out);

class Updater {
 public:
  explicit Updater(KVOptimizer o) : opt_(std::move(o)) {}
  const KVOptimizer& options() const { return opt_; }
  // weight[i] updated from grad[i] (same size), with the state of slice (key, offset).
  void apply(int key, int64_t offset, std::span<const float> grad, std::span<float> weight);
  // KVOptimizer::lookahead: weight += momentum * mom of slice (key, offset), if it has any.
  void look_ahead(int key, int64_t offset, std::span<float> weight) const;

  // The state of every slice, as bytes; load() takes the slices this holder owns out of a
  // saved set: `owned` lists (key, offset, size); a saved slice of an owned (key, offset)
  // with another size, or another optimizer kind, is an error, and then nothing is loaded.
  // With `apply` false it only checks (servers all check before any applies, so a file that
  // one server refuses changes no server's state).
  std::vector<uint8_t> save() const;
  Status load(const uint8_t* p, size_t n, const std::vector<std::pair<std::pair<int, int64_t>, int64_t>>& owned,
              bool apply = true);

 private:
  struct State {
    std::vector<float> a, b;  // sgd: momentum (a); adam: m (a), v (b)
    int64_t t = 0;            // updates applied (Adam's bias correction)
  };
  KVOptimizer opt_;
  std::map<std::pair<int, int64_t>, State> state_;
};

}  // namespace kolo::kv
