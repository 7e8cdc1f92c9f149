// The built-in optimizer of the store and its state: kvstore/updater.h.
#include "kvstore/updater.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "kvstore/bytes.h"

namespace kolo::kv {
namespace {

constexpr uint32_t kStateMagic = 0x4b565331;  // "KVS1"

float clipped(float g, double clip) {
  if (clip < 0) return g;
  const auto c = static_cast<float>(clip);
  return std::clamp(g, -c, c);
}

}  // namespace

Status validate(const KVOptimizer& o) {
  auto bad = [](const std::string& what) { return Status::invalid_argument("KVOptimizer: " + what); };
  if (o.kind != "sgd" && o.kind != "adam") return bad("kind \"" + o.kind + "\" is not one of sgd, adam");
  if (!(o.learning_rate == o.learning_rate)) return bad("learning_rate is NaN");
  if (o.momentum < 0 || o.momentum >= 1) return bad("momentum " + std::to_string(o.momentum) + " is not in [0, 1)");
  if (o.wd < 0) return bad("wd " + std::to_string(o.wd) + " is negative");
  if (o.beta1 < 0 || o.beta1 >= 1 || o.beta2 < 0 || o.beta2 >= 1) return bad("beta1 and beta2 must be in [0, 1)");
  if (o.epsilon <= 0) return bad("epsilon must be positive");
  if (o.lookahead && (o.kind != "sgd" || o.momentum <= 0)) return bad("lookahead needs sgd with momentum > 0");
  if (o.lr_schedule != "constant" && o.lr_schedule != "cosine")
    return bad("lr_schedule \"" + o.lr_schedule + "\" is not one of constant, cosine");
  if (o.warmup_updates < 0) return bad("warmup_updates " + std::to_string(o.warmup_updates) + " is negative");
  if (o.lr_schedule == "cosine" && o.max_updates <= o.warmup_updates)
    return bad("cosine schedule: max_updates " + std::to_string(o.max_updates) + " must exceed warmup_updates " +
               std::to_string(o.warmup_updates));
  if (!(o.warmup_begin_lr == o.warmup_begin_lr) || !(o.final_lr == o.final_lr))
    return bad("warmup_begin_lr or final_lr is NaN");
  return Status::ok();
}

Status validate_for(const KVOptimizer& o, const std::string& store_type) {
  KOLO_RETURN_IF_ERROR(validate(o));
  if (o.lookahead && store_type != "dist_async")
    return Status::invalid_argument("KVOptimizer: lookahead is for dist_async (in " + store_type +
                                    " every worker computes its gradient at the weights the update is applied to)");
  return Status::ok();
}

std::vector<uint8_t> encode(const KVOptimizer& o) {
  ByteWriter w;
  w.put_string(o.kind);
  for (double d : {o.learning_rate, o.momentum, o.wd, o.rescale_grad, o.clip_gradient, o.beta1, o.beta2, o.epsilon})
    w.put(d);
  w.put(static_cast<uint8_t>(o.lookahead));
  w.put_string(o.lr_schedule);
  w.put(o.warmup_updates);
  w.put(o.warmup_begin_lr);
  w.put(o.max_updates);
  w.put(o.final_lr);
  return std::move(w.bytes());
}

Status decode(const uint8_t* p, size_t n, KVOptimizer* out) {
  ByteReader r(p, n);
  KVOptimizer o;
  o.kind = r.get_string();
  for (double* d : {&o.learning_rate, &o.momentum, &o.wd, &o.rescale_grad, &o.clip_gradient, &o.beta1, &o.beta2,
                    &o.epsilon})
    *d = r.get<double>();
  o.lookahead = r.get<uint8_t>() != 0;
  o.lr_schedule = r.get_string();
  o.warmup_updates = r.get<int64_t>();
  o.warmup_begin_lr = r.get<double>();
  o.max_updates = r.get<int64_t>();
  o.final_lr = r.get<double>();
  if (!r.ok() || !r.at_end()) return Status::invalid_argument("KVOptimizer message of " + std::to_string(n) + " bytes is malformed");
  *out = o;
  return validate(o);
}

double learning_rate_at(const KVOptimizer& o, int64_t u) {
  if (u < o.warmup_updates)
    return o.warmup_begin_lr + (o.learning_rate - o.warmup_begin_lr) * static_cast<double>(u) /
                                   static_cast<double>(o.warmup_updates);
  if (o.lr_schedule != "cosine") return o.learning_rate;
  if (u > o.max_updates) return o.final_lr;
  const double p = static_cast<double>(u - o.warmup_updates) / static_cast<double>(o.max_updates - o.warmup_updates);
  return o.final_lr + (o.learning_rate - o.final_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
}

void Updater::apply(int key, int64_t offset, std::span<const float> grad, std::span<float> weight) {
  State& s = state_[{key, offset}];
  const size_t n = weight.size();
  ++s.t;
  const double rate = learning_rate_at(opt_, s.t);
  const auto lr = static_cast<float>(rate), wd = static_cast<float>(opt_.wd),
             rescale = static_cast<float>(opt_.rescale_grad);
  if (opt_.kind == "sgd") {
    if (opt_.momentum == 0) {
      for (size_t i = 0; i < n; ++i) weight[i] -= lr * (clipped(rescale * grad[i], opt_.clip_gradient) + wd * weight[i]);
      return;
    }
    if (s.a.size() != n) s.a.assign(n, 0.0f);
    const auto mom = static_cast<float>(opt_.momentum);
    for (size_t i = 0; i < n; ++i) {
      const float g = clipped(rescale * grad[i], opt_.clip_gradient) + wd * weight[i];
      s.a[i] = mom * s.a[i] - lr * g;
      weight[i] += s.a[i];
    }
    return;
  }
  if (s.a.size() != n) s.a.assign(n, 0.0f);
  if (s.b.size() != n) s.b.assign(n, 0.0f);
  const auto b1 = static_cast<float>(opt_.beta1), b2 = static_cast<float>(opt_.beta2),
             eps = static_cast<float>(opt_.epsilon);
  const auto t = static_cast<double>(s.t);
  const auto step = static_cast<float>(rate * std::sqrt(1.0 - std::pow(opt_.beta2, t)) /
                                       (1.0 - std::pow(opt_.beta1, t)));
  for (size_t i = 0; i < n; ++i) {
    const float g = clipped(rescale * grad[i], opt_.clip_gradient) + wd * weight[i];
    s.a[i] = b1 * s.a[i] + (1 - b1) * g;
    s.b[i] = b2 * s.b[i] + (1 - b2) * g * g;
    weight[i] -= step * s.a[i] / (std::sqrt(s.b[i]) + eps);
  }
}

void Updater::look_ahead(int key, int64_t offset, std::span<float> weight) const {
  auto it = state_.find({key, offset});
  if (it == state_.end() || it->second.a.size() != weight.size()) return;  // no update yet
  const auto mom = static_cast<float>(opt_.momentum);
  for (size_t i = 0; i < weight.size(); ++i) weight[i] += mom * it->second.a[i];
}

std::vector<uint8_t> Updater::save() const {
  ByteWriter w;
  w.put(kStateMagic);
  w.put_string(opt_.kind);
  w.put(static_cast<uint64_t>(state_.size()));
  for (const auto& [where, s] : state_) {
    w.put(where.first);
    w.put(where.second);
    w.put(s.t);
    w.put_floats(s.a.data(), static_cast<int64_t>(s.a.size()));
    w.put_floats(s.b.data(), static_cast<int64_t>(s.b.size()));
  }
  return std::move(w.bytes());
}

Status Updater::load(const uint8_t* p, size_t n, const std::vector<std::pair<std::pair<int, int64_t>, int64_t>>& owned,
                     bool apply) {
  std::map<std::pair<int, int64_t>, int64_t> sizes(owned.begin(), owned.end());
  std::map<std::pair<int, int64_t>, State> loaded;
  ByteReader r(p, n);
  auto corrupt = [&](const std::string& why) { return Status::invalid_argument("optimizer state: " + why); };
  while (r.ok() && !r.at_end()) {
    if (r.get<uint32_t>() != kStateMagic) return corrupt("not a kolo KVStore optimizer state (bad magic)");
    const std::string kind = r.get_string();
    if (r.ok() && kind != opt_.kind)
      return corrupt("saved by optimizer \"" + kind + "\" but this store runs \"" + opt_.kind + "\"");
    const auto count = r.get<uint64_t>();
    for (uint64_t i = 0; i < count && r.ok(); ++i) {
      const auto key = r.get<int>();
      const auto offset = r.get<int64_t>();
      State s;
      s.t = r.get<int64_t>();
      s.a = r.get_floats();
      s.b = r.get_floats();
      auto it = sizes.find({key, offset});
      if (!r.ok() || it == sizes.end()) continue;
      const auto want = static_cast<size_t>(it->second);
      if ((!s.a.empty() && s.a.size() != want) || (!s.b.empty() && s.b.size() != want))
        return corrupt("key " + std::to_string(key) + " at element " + std::to_string(offset) + " holds " +
                       std::to_string(want) + " values here but " + std::to_string(std::max(s.a.size(), s.b.size())) +
                       " in the file (saved with another key size or server count?)");
      loaded[{key, offset}] = std::move(s);
    }
  }
  if (!r.ok()) return corrupt("the data is truncated or corrupt");
  if (!apply) return Status::ok();
  for (auto& [where, s] : loaded) state_[where] = std::move(s);
  return Status::ok();
}

}  // namespace kolo::kv
