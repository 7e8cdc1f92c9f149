// KVStore types "local" and "allreduce": the weights live on every worker (kvstore/stores.h).
// "allreduce" sums each push over the workers with kolo's allreduce (negotiated, fused and
// run on shared memory or MPI like any gradient), then every worker applies the same update
// to its own copy: the copies stay equal without any server.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "kolo/collectives.h"
#include "kolo/handle.h"
#include "kolo/runtime.h"
#include "kvstore/stores.h"
#include "kvstore/updater.h"

namespace kolo::kv {
namespace {

class LocalStore final : public KVStore {
 public:
  explicit LocalStore(const std::string& type) : KVStore(type), allreduce_(type == "allreduce") {}

  int rank() const override { return allreduce_ ? kolo::rank() : 0; }
  int num_workers() const override { return allreduce_ ? kolo::size() : 1; }

  void set_optimizer(const KVOptimizer& o) override {
    throw_if_error(validate_for(o, type()));
    optimizer_ = std::make_unique<Updater>(o);
    custom_ = {};
  }
  void set_updater(KVUpdater u) override { custom_ = std::move(u); }

  void barrier() override {
    if (!allreduce_) return;
    int32_t one = 1;
    allreduce(TensorView::of(&one, Shape{1}), "kvstore.barrier", AllreduceOptions{ReduceOp::kSum});
  }

  void sum_over_workers(std::span<double> values) override {
    if (!allreduce_ || values.empty()) return;
    allreduce(TensorView::of(values.data(), Shape{static_cast<int64_t>(values.size())}), "kvstore.sum_over_workers",
              AllreduceOptions{ReduceOp::kSum});
  }

  void save_optimizer_states(const std::string& path) override {
    // Every worker has an optimizer before worker 0 writes anything.
    agree(optimizer_ ? Status::ok() : Status::invalid_argument("save_optimizer_states: no optimizer (set_optimizer first)"));
    agree(rank() == 0 ? write_file_atomically(path, optimizer_->save()) : Status::ok());
  }

  void load_optimizer_states(const std::string& path) override {
    // A worker without an optimizer says so in the agreement rather than throwing alone
    // (its peers would wait for it in the agreement's collective).
    Status s = optimizer_ ? Status::ok() : Status::invalid_argument("load_optimizer_states: no optimizer (set_optimizer first)");
    std::vector<uint8_t> bytes;
    if (s.is_ok() && rank() == 0) s = read_file(path, &bytes);
    agree(s);
    if (allreduce_) {  // worker 0's file reaches every worker (no shared file system needed)
      int64_t n = static_cast<int64_t>(bytes.size());
      broadcast(TensorView::of(&n, Shape{1}), 0, "kvstore.state.size");
      bytes.resize(static_cast<size_t>(n));
      if (n > 0) broadcast(TensorView::of(bytes.data(), Shape{n}), 0, "kvstore.state.bytes");
    }
    std::vector<std::pair<std::pair<int, int64_t>, int64_t>> owned;
    for (const auto& [key, w] : weights_) owned.push_back({{key, 0}, static_cast<int64_t>(w.size())});
    throw_if_error(optimizer_->load(bytes.data(), bytes.size(), owned));
  }

 protected:
  void do_init(const std::vector<Item>& items) override {
    std::vector<Handle> handles;
    for (const Item& it : items) {
      auto& w = weights_[it.key];
      w.assign(it.data, it.data + it.size);
      if (allreduce_ && it.size > 0)  // worker 0's values, as the dist types keep
        handles.push_back(broadcast_async(TensorView::of(w.data(), Shape{it.size}), 0, name("init", it.key)));
    }
    for (const Handle& h : handles) synchronize(h);
  }

  void do_push(const std::vector<Item>& items) override {
    std::vector<std::vector<float>> sums(items.size());
    std::vector<Handle> handles;
    for (size_t i = 0; i < items.size(); ++i) {
      sums[i].assign(items[i].data, items[i].data + items[i].size);
      if (allreduce_ && items[i].size > 0)
        handles.push_back(allreduce_async(TensorView::of(sums[i].data(), Shape{items[i].size}),
                                          name("push", items[i].key), AllreduceOptions{ReduceOp::kSum}));
    }
    for (const Handle& h : handles) synchronize(h);
    for (size_t i = 0; i < items.size(); ++i) {
      auto& w = weights_[items[i].key];
      if (custom_) custom_(items[i].key, 0, sums[i], w);
      else if (optimizer_) optimizer_->apply(items[i].key, 0, sums[i], w);
      else w = std::move(sums[i]);
    }
  }

  void do_pull(const std::vector<Item>& items) override {
    for (const Item& it : items) {
      const auto& w = weights_[it.key];
      std::copy(w.begin(), w.end(), it.data);
    }
  }

 private:
  static std::string name(const char* what, int key) {
    return std::string("kvstore.") + what + "." + std::to_string(key);
  }
  // Every worker ends with worker 0's verdict (so none waits for a peer that threw).
  // Every worker's verdict, gathered: a fault on any worker fails the call on every worker,
  // with its own reason where it failed, else the lowest failing worker's.
  void agree(const Status& s) {
    if (!allreduce_) return throw_if_error(s);
    constexpr size_t kText = 1024;
    std::vector<uint8_t> text(kText, 0);
    if (!s.is_ok()) std::snprintf(reinterpret_cast<char*>(text.data()), kText, "%s", s.message().c_str());
    const Tensor all = allgather(TensorView::of(text.data(), Shape{static_cast<int64_t>(kText)}), "kvstore.agree");
    throw_if_error(s);
    for (int r = 0; r < size(); ++r) {
      const char* t = all.data<char>() + static_cast<size_t>(r) * kText;
      if (t[0] != '\0')
        throw Error(Status::invalid_argument(std::string(t, strnlen(t, kText)) + " (reported by worker " +
                                             std::to_string(r) + ")"));
    }
  }

  const bool allreduce_;
  std::map<int, std::vector<float>> weights_;
  std::unique_ptr<Updater> optimizer_;
  KVUpdater custom_;
};

}  // namespace

std::unique_ptr<KVStore> make_local_store(const std::string& type) { return std::make_unique<LocalStore>(type); }

}  // namespace kolo::kv
