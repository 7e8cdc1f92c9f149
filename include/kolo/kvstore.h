// kolo/kvstore.h — a key-value store of parameters with MXNet's KVStore semantics: workers
// push gradients and pull weights; the optimizer runs where the weights live.
//
// Types (KVStore::create):
//   "local"      one process; push sums the values given, the updater (if any) applies them.
//   "allreduce"  every rank is a worker; push sums the workers' values with kolo's allreduce
//                and every worker applies the same update to its own copy (dist_sync
//                semantics without servers; kolo's default data-parallel path).
//   "dist_sync"  the last KOLO_NUM_SERVERS ranks are servers, the others workers. A server
//                holds its share of every key; it waits for one push of a key from every
//                worker, sums them and applies the optimizer once: n workers with batch b
//                behave as one worker with batch n*b. A push returns once its update is
//                applied, so a pull after it sees the new weights.
//   "dist_async" as dist_sync, but a server applies each worker's push as it arrives;
//                updates of one key never overlap; their order between workers is not fixed.
// Keys are ints; values are float32 CPU tensors, or float16/bfloat16 ones, which the store
// keeps as float32 (MXNet's multi-precision: float32 master weights, the optimizer in float32;
// a pull rounds to the key's dtype); a key's dtype is init's. A key of at least KOLO_KVSTORE_BIGARRAY_BOUND
// elements is split evenly across all servers (as ps-lite does); a smaller one lives whole
// on one server. docs/kvstore.md says when to choose which type and where servers go.
//
// Server ranks call run_server() after create(); it returns once every worker has called
// close() (or destroyed its store). Workers and servers talk through MPI on their own
// communicator; every wait on a peer is bounded: a dead worker or server (core/liveness.h)
// becomes a kolo::Error naming it on every other process, never a hang.
//
// Errors: every method throws kolo::Error (bad argument, mismatched shape, dead peer).
// Ownership: the store copies what it is given; outputs of pull() are written before return.
// Thread safety: one thread per store. create() and close() are collective over all ranks
// (dist types, allreduce) and need kolo::init() first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kolo/tensor.h"

namespace kolo {

// The optimizer the store runs (MXNet's update rules; `rescale_grad` multiplies the summed
// gradient first, e.g. 1/(workers*batch) for a sum of per-sample gradients):
//   sgd:   g = clip(rescale*grad) + wd*w;  mom = momentum*mom - lr*g;  w += mom
//          (without momentum: w -= lr*g)
//   adam:  g = clip(rescale*grad) + wd*w;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
//          w -= lr*sqrt(1-b2^t)/(1-b1^t) * m/(sqrt(v)+eps)
struct KVOptimizer {
  std::string kind = "sgd";  // "sgd" or "adam"
  double learning_rate = 0.01;
  double momentum = 0.0;
  double wd = 0.0;
  double rescale_grad = 1.0;
  double clip_gradient = -1.0;  // < 0: no clipping
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  // dist_async, sgd with momentum only: a pull returns w + momentum*mom, the point the shared
  // momentum carries the weights to by the next update, instead of w. A worker's gradient is
  // then computed near where the server applies it (after the other workers' pushes), which
  // takes most of the staleness out of momentum SGD (docs/kvstore.md, "dist_async accuracy").
  bool lookahead = false;
  // Learning-rate schedule, applied where the weights live (MXNet's CosineScheduler): by the
  // number u = 1, 2, ... of the update being applied to a slice of a key (in dist_async every
  // worker's push is one update, so n workers make n updates per step each), the rate is
  //   u <  warmup_updates:  warmup_begin_lr + (learning_rate - warmup_begin_lr) * u / warmup_updates
  //   u <= max_updates:     final_lr + (learning_rate - final_lr) * (1 + cos(pi * p)) / 2,
  //                         p = (u - warmup_updates) / (max_updates - warmup_updates)
  //   later:                final_lr.
  // "constant" (the default) keeps learning_rate; warmup_updates also applies to it (then
  // learning_rate from u = warmup_updates on). Saved optimizer states keep u.
  std::string lr_schedule = "constant";  // "constant" or "cosine"
  int64_t warmup_updates = 0;
  double warmup_begin_lr = 0.0;
  int64_t max_updates = 0;  // cosine: > warmup_updates
  double final_lr = 0.0;
};

// A custom update: `weight` (elements [offset, offset+size) of key `key`) from `grad`, the
// summed gradient of the same elements. In the dist types a key may arrive in slices.
using KVUpdater = std::function<void(int key, int64_t offset, std::span<const float> grad, std::span<float> weight)>;

class KVStore {
 public:
  // REQUIRES: kolo::init() for every type but "local". Throws kolo::Error for an unknown
  // type, or servers (KOLO_NUM_SERVERS) for a type that has none.
  static std::unique_ptr<KVStore> create(const std::string& type);
  virtual ~KVStore();
  KVStore(const KVStore&) = delete;
  KVStore& operator=(const KVStore&) = delete;

  const std::string& type() const { return type_; }
  virtual int rank() const = 0;         // this worker among the workers; -1 on a server
  virtual int num_workers() const = 0;
  virtual int num_servers() const { return 0; }
  virtual bool is_server() const { return false; }

  // Every worker calls init with the same keys and shapes; worker 0's values are stored.
  void init(int key, const TensorView& value);
  void init(const std::vector<int>& keys, const std::vector<TensorView>& values);
  // Values given for the same key in one call are summed first. Higher priority goes first.
  void push(int key, const TensorView& value, int priority = 0);
  void push(const std::vector<int>& keys, const std::vector<TensorView>& values, int priority = 0);
  void pull(int key, const TensorView& out, int priority = 0);
  void pull(const std::vector<int>& keys, const std::vector<TensorView>& outs, int priority = 0);
  // push then pull (`outs` may alias `values`).
  void pushpull(const std::vector<int>& keys, const std::vector<TensorView>& values,
                const std::vector<TensorView>& outs, int priority = 0);

  // Worker 0's optimizer is sent to the servers (dist types); then every worker waits.
  virtual void set_optimizer(const KVOptimizer& optimizer) = 0;
  // A function runs where it is set: in "local" and "allreduce" on each worker; the dist
  // types cannot ship one to the servers (give it to run_server() there instead).
  virtual void set_updater(KVUpdater updater) = 0;
  // Returns once every worker has called it.
  virtual void barrier() = 0;
  // Worker 0 writes (reads) the optimizer state of every key, wherever it lives; collective
  // over the workers. The file is written to a temporary name and renamed.
  virtual void save_optimizer_states(const std::string& path) = 0;
  virtual void load_optimizer_states(const std::string& path) = 0;
  // Sum of `values` over the workers (metrics): workers only; servers take no part.
  virtual void sum_over_workers(std::span<double> values) = 0;

  // Servers: serve until every worker has closed. `updater`, when set, replaces the
  // optimizer sent by set_optimizer. Throws kolo::Error on a dead peer.
  virtual void run_server(KVUpdater updater = {});
  // Bytes of values this worker has sent to and received from the servers (init, push and
  // pull payloads; a float16/bfloat16 key travels in 2 bytes per element, a float32 one in
  // 4); 0 in "local" and "allreduce". For tests and measurements.
  virtual int64_t value_bytes_moved() const { return 0; }
  // Workers: tell the servers this worker is done, then wait for every rank (collective).
  // Called by the destructor if forgotten (errors are then logged, not thrown).
  virtual void close() {}

 protected:
  explicit KVStore(std::string type) : type_(std::move(type)) {}

  // One checked request: the key, the (summed) value or output as float32, its shape, and
  // the key's dtype (the dist types send 16-bit keys' values in 16 bits).
  struct Item {
    int key = 0;
    float* data = nullptr;
    int64_t size = 0;
    Shape shape;
    DType dtype = DType::kFloat32;
  };
  virtual void do_init(const std::vector<Item>& items) = 0;
  virtual void do_push(const std::vector<Item>& items) = 0;
  virtual void do_pull(const std::vector<Item>& items) = 0;
  // The shape `key` was initialised with, or nullptr.
  const Shape* known_shape(int key) const;

 private:
  struct Known {
    Shape shape;
    DType dtype = DType::kFloat32;
  };
  struct Staging;  // float32 copies of 16-bit values and of summed duplicates (kvstore.cc)
  const Known* known(int key) const;
  std::vector<Item> check(const char* what, const std::vector<int>& keys, const std::vector<TensorView>& values,
                          bool sum_duplicates, Staging* staging) const;
  std::string type_;
  std::vector<std::pair<int, Known>> known_;  // sorted by key
};

}  // namespace kolo
