// kvstore/server.h — the loop of one parameter server of a dist KVStore.
//
// The server holds the slices of keys that kvstore/sharding.h places on it. For each
// request, in arrival order, on one thread (so updates of one key never overlap):
//   init    stores worker 0's values of the slice;
//   push    dist_sync: adds the gradient to the slice's sum of this round and keeps the
//           reply; once every worker has pushed, applies the update (optimizer, custom
//           updater, or — with neither — stores the sum) and replies to all of them.
//           dist_async: applies this one gradient at once and replies;
//   pull    replies with the slice's weights;
// Values travel in the key's dtype (float32, float16 or bfloat16: kvstore/wire.h) and are
// float32 on the server (sums, optimizer, master weights); a request in another dtype than
// the key's init is refused.
//   set_optimizer / save / load optimizer state, and close (a worker is done).
// A request that does not fit (unknown key, another size than init gave) gets an error reply
// naming the key, the sizes and this server; the loop goes on.
//
// Ownership: borrows the Transport. Thread safety: one thread (the one in run()).
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "kolo/kvstore.h"
#include "kvstore/transport.h"
#include "kvstore/updater.h"

namespace kolo::kv {

class Server {
 public:
  Server(Transport& t, bool sync, KVUpdater custom) : t_(t), sync_(sync), custom_(std::move(custom)) {}
  // Serves until every worker has sent close; a dead peer or a transport failure ends it.
  Status run();

 private:
  struct Slice {
    int64_t total = 0;              // elements of the whole key
    DType dtype = DType::kFloat32;  // of the key: its values travel in it (kvstore/wire.h)
    std::vector<float> weight;
    std::vector<float> sum;         // dist_sync: this round's gradients, summed
    std::vector<std::pair<int, uint64_t>> waiting;  // dist_sync: (worker, seq) pushed this round
  };
  Status handle(const Header& h, int source);
  Status push(const Header& h, int source, Slice& s);
  void apply(int key, int64_t offset, Slice& s, const std::vector<float>& grad);
  Status reply(int dest, const Header& request, const void* payload = nullptr, int64_t bytes = 0);
  Status reply_error(int dest, const Header& request, const std::string& message);
  // Receives a request's payload, or discards it (into scratch) when `into` is null.
  Status receive(const Header& h, int source, void* into);
  // Receives a request's values (h.size elements in dtype h.dtype) as float32 into `into`.
  Status receive_values(const Header& h, int source, float* into);
  std::string where(const Header& h) const;

  Transport& t_;
  const bool sync_;
  KVUpdater custom_;
  std::unique_ptr<Updater> optimizer_;
  std::map<std::pair<int, int64_t>, Slice> slices_;  // by (key, offset)
  std::vector<float> scratch_;
  std::vector<uint8_t> wire_;  // 16-bit values as received
  int closed_ = 0;
};

}  // namespace kolo::kv
