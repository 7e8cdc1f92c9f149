// KVStore types "dist_sync" and "dist_async": the worker side, and run_server() for the
// server ranks (kvstore/server.h). See kolo/kvstore.h for the semantics.
#include <algorithm>
#include <cstring>

#include "core/logging.h"
#include "core/runtime_access.h"
#include "kvstore/server.h"
#include "kvstore/stores.h"
#include "kvstore/transport.h"
#include "kvstore/updater.h"
#include "kvstore/wire.h"

namespace kolo::kv {
namespace {

// One request of a worker to a server, and where its reply goes.
struct Request {
  int server_rank = 0;
  Header h;
  const void* payload = nullptr;  // h.payload_bytes to send
  std::shared_ptr<void> keep;     // owns the payload when it was converted to 16 bits
  float* out = nullptr;           // pull: h.size floats of reply (sent in dtype h.dtype)
  std::vector<uint8_t>* blob = nullptr;  // save: the reply's bytes
};

// Every call that talks over MPI holds a RuntimeLease (core/runtime_access.h): one racing
// kolo::shutdown() completes, or ends with the shutdown message at its next wait; MPI is not
// finalized under it.
class DistStore final : public KVStore {
 public:
  DistStore(const std::string& type, const Config& config, std::unique_ptr<Transport> t)
      : KVStore(type), bound_(config.kvstore_bigarray_bound), t_(std::move(t)) {}

  ~DistStore() override {
    try {
      close();
    } catch (const Error& e) {
      KOLO_LOG(LogLevel::kError, "KVStore close: " << e.what());
    }
  }

  int rank() const override { return is_server() ? -1 : t_->rank(); }
  int num_workers() const override { return t_->roles().workers; }
  int num_servers() const override { return t_->roles().servers; }
  bool is_server() const override { return t_->roles().is_server(t_->rank()); }
  int64_t value_bytes_moved() const override { return moved_; }

  void set_optimizer(const KVOptimizer& o) override {
    const detail::RuntimeLease lease;
    require_worker("set_optimizer");
    throw_if_error(validate_for(o, type()));
    const auto bytes = encode(o);
    Status s = Status::ok();
    if (rank() == 0) s = to_every_server(Op::kSetOptimizer, bytes, nullptr);
    agree(s);
  }

  void set_updater(KVUpdater) override {
    throw Error(Status::invalid_argument(
        "KVStore " + type() + " set_updater: a function cannot be sent to the servers; use set_optimizer, or pass "
        "the updater to run_server() on the server ranks"));
  }

  void barrier() override {
    const detail::RuntimeLease lease;
    require_worker("barrier");
    MPI_Request req;
    throw_if_error(ops_status(MPI_Ibarrier(t_->workers(), &req), "MPI_Ibarrier(workers)"));
    throw_if_error(t_->wait(&req, "in the KVStore workers' barrier"));
  }

  void sum_over_workers(std::span<double> values) override {
    const detail::RuntimeLease lease;
    require_worker("sum_over_workers");
    MPI_Request req;
    throw_if_error(ops_status(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                                             MPI_DOUBLE, MPI_SUM, t_->workers(), &req),
                              "MPI_Iallreduce(workers)"));
    throw_if_error(t_->wait(&req, "summing over the KVStore workers"));
  }

  void save_optimizer_states(const std::string& path) override {
    const detail::RuntimeLease lease;
    require_worker("save_optimizer_states");
    Status s = Status::ok();
    if (rank() == 0) {
      std::vector<uint8_t> all;
      s = to_every_server(Op::kSaveState, {}, &all);
      if (s.is_ok()) s = write_file_atomically(path, all);
    }
    agree(s);
  }

  void load_optimizer_states(const std::string& path) override {
    const detail::RuntimeLease lease;
    require_worker("load_optimizer_states");
    Status s = Status::ok();
    if (rank() == 0) {
      std::vector<uint8_t> bytes;
      s = read_file(path, &bytes);
      // Every server checks the file before any loads it: one that refuses its part leaves
      // every server's state as it was (docs/kvstore.md).
      if (s.is_ok()) s = to_every_server(Op::kCheckState, bytes, nullptr);
      if (s.is_ok()) s = to_every_server(Op::kLoadState, bytes, nullptr);
    }
    agree(s);
  }

  void run_server(KVUpdater updater) override {
    if (!is_server()) KVStore::run_server(std::move(updater));
    const detail::RuntimeLease lease;
    Server server(*t_, type() == "dist_sync", std::move(updater));
    throw_if_error(server.run());
    closed_ = true;
    throw_if_error(everyone_done());
  }

  void close() override {
    if (closed_ || is_server() || t_->peer_dead()) return;
    closed_ = true;
    if (detail::RuntimeLease::closing()) return;  // kolo was shut down first: no MPI to talk on
    const detail::RuntimeLease lease;
    Header h;
    h.op = Op::kStop;
    for (int s = 0; s < num_servers(); ++s) throw_if_error(t_->send(t_->roles().server_rank(s), h, nullptr));
    throw_if_error(t_->flush("telling the KVStore servers this worker is done"));
    throw_if_error(everyone_done());
  }

 protected:
  void do_init(const std::vector<Item>& items) override {
    const detail::RuntimeLease lease;
    Status s = Status::ok();
    if (rank() == 0) s = exchange(requests(Op::kInit, items));
    agree(s);
  }
  void do_push(const std::vector<Item>& items) override {
    const detail::RuntimeLease lease;
    throw_if_error(exchange(requests(Op::kPush, items)));
  }
  void do_pull(const std::vector<Item>& items) override {
    const detail::RuntimeLease lease;
    throw_if_error(exchange(requests(Op::kPull, items)));
  }

 private:
  static Status ops_status(int rc, const char* what) {
    return rc == MPI_SUCCESS ? Status::ok() : Status::communication(std::string("KVStore: ") + what + " failed");
  }

  void require_worker(const char* what) const {
    if (is_server())
      throw Error(Status::invalid_argument("KVStore " + type() + " " + what + ": this rank is a server (" +
                                           describe_rank(t_->roles(), t_->rank()) + "); call run_server()"));
  }

  std::vector<Request> requests(Op op, const std::vector<Item>& items) {
    std::vector<Request> out;
    for (const Item& it : items) {
      for (const Slice& sl : place_key(it.key, it.size, num_servers(), bound_)) {
        Request r;
        r.server_rank = t_->roles().server_rank(sl.server);
        r.h.op = op;
        r.h.key = it.key;
        r.h.offset = sl.offset;
        r.h.size = sl.size;
        r.h.total = it.size;
        r.h.sync = type() == "dist_sync";
        r.h.dtype = static_cast<int32_t>(it.dtype);
        if (op == Op::kPull) {
          r.out = it.data + sl.offset;
        } else if (it.dtype == DType::kFloat32) {
          r.payload = it.data + sl.offset;
          r.h.payload_bytes = sl.size * wire_size(it.dtype);
        } else {  // 16-bit keys travel in 16 bits: half the bytes
          r.h.payload_bytes = sl.size * wire_size(it.dtype);
          auto wire = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(r.h.payload_bytes));
          to_wire(it.data + sl.offset, sl.size, it.dtype, wire->data());
          r.payload = wire->data();
          r.keep = wire;
        }
        out.push_back(r);
      }
    }
    return out;
  }

  // Worker 0: the same command to every server; `blobs` collects the replies' bytes.
  Status to_every_server(Op op, const std::vector<uint8_t>& payload, std::vector<uint8_t>* blobs) {
    std::vector<Request> reqs;
    std::vector<std::vector<uint8_t>> replies(static_cast<size_t>(num_servers()));
    for (int s = 0; s < num_servers(); ++s) {
      Request r;
      r.server_rank = t_->roles().server_rank(s);
      r.h.op = op;
      r.h.payload_bytes = static_cast<int64_t>(payload.size());
      r.payload = payload.data();
      r.blob = &replies[static_cast<size_t>(s)];
      reqs.push_back(r);
    }
    KOLO_RETURN_IF_ERROR(exchange(std::move(reqs)));
    if (blobs)
      for (const auto& b : replies) blobs->insert(blobs->end(), b.begin(), b.end());
    return Status::ok();
  }

  // Sends every request, then takes replies (in any order) until each has one. Every reply
  // is received even after an error, so the next call starts with nothing left over.
  Status exchange(std::vector<Request> reqs) {
    for (Request& r : reqs) {
      r.h.seq = ++seq_;
      KOLO_RETURN_IF_ERROR(t_->send(r.server_rank, r.h, r.payload, kTagRequest, r.keep));
      if (r.h.op == Op::kInit || r.h.op == Op::kPush) moved_ += r.h.payload_bytes;
    }
    Status first_error = Status::ok();
    size_t answered = 0;
    const std::string during = "waiting for the KVStore servers' replies to " + type() + " " +
                               (reqs.empty() ? "" : op_name(reqs.front().h.op));
    for (int idle = 0; answered < reqs.size();) {
      Header h;
      int source = -1;
      bool got = false;
      KOLO_RETURN_IF_ERROR(t_->poll(kTagReply, &h, &source, &got));
      size_t pending = 0;
      KOLO_RETURN_IF_ERROR(t_->progress(&pending));
      if (!got) {
        KOLO_RETURN_IF_ERROR(t_->idle(idle++, during.c_str()));
        continue;
      }
      idle = 0;
      auto it = std::find_if(reqs.begin(), reqs.end(), [&](const Request& r) { return r.h.seq == h.seq; });
      if (it == reqs.end() || source != it->server_rank)
        return Status::internal("KVStore: a reply from " + describe_rank(t_->roles(), source) +
                                " matches no request of this worker");
      ++answered;
      if (h.payload_bytes <= 0) continue;
      if (h.failed) {
        std::string text(static_cast<size_t>(h.payload_bytes), '\0');
        KOLO_RETURN_IF_ERROR(t_->receive_payload(source, kTagReply, text.data(), h.payload_bytes, during.c_str()));
        if (first_error.is_ok()) first_error = Status::mismatch("KVStore " + type() + ": " + text);
      } else if (it->blob != nullptr) {
        it->blob->resize(static_cast<size_t>(h.payload_bytes));
        KOLO_RETURN_IF_ERROR(t_->receive_payload(source, kTagReply, it->blob->data(), h.payload_bytes, during.c_str()));
      } else if (it->out != nullptr && h.dtype == it->h.dtype &&
                 h.payload_bytes == it->h.size * wire_size(static_cast<DType>(it->h.dtype))) {
        const auto dtype = static_cast<DType>(it->h.dtype);
        if (dtype == DType::kFloat32) {
          KOLO_RETURN_IF_ERROR(t_->receive_payload(source, kTagReply, it->out, h.payload_bytes, during.c_str()));
        } else {
          wire_.resize(static_cast<size_t>(h.payload_bytes));
          KOLO_RETURN_IF_ERROR(t_->receive_payload(source, kTagReply, wire_.data(), h.payload_bytes, during.c_str()));
          from_wire(wire_.data(), it->h.size, dtype, it->out);
        }
        moved_ += h.payload_bytes;
      } else {
        return Status::internal("KVStore: a reply of " + std::to_string(h.payload_bytes) + " bytes from " +
                                describe_rank(t_->roles(), source) + " where none was expected");
      }
    }
    KOLO_RETURN_IF_ERROR(t_->flush(during.c_str()));
    return first_error;
  }

  // Every worker ends with worker 0's verdict on a step only worker 0 performs.
  void agree(const Status& mine) {
    char buf[1024] = {};
    if (rank() == 0 && !mine.is_ok()) {
      buf[0] = 1;
      std::snprintf(buf + 1, sizeof(buf) - 1, "%s", mine.message().c_str());
    }
    MPI_Request req;
    throw_if_error(ops_status(MPI_Ibcast(buf, sizeof(buf), MPI_CHAR, 0, t_->workers(), &req), "MPI_Ibcast(workers)"));
    throw_if_error(t_->wait(&req, "waiting for KVStore worker 0"));
    if (rank() == 0) return throw_if_error(mine);
    if (buf[0] != 0) throw Error(Status::invalid_argument(std::string(buf + 1) + " (reported by worker 0)"));
  }

  // Collective over every rank of the store: nobody leaves (and exits) while a peer may
  // still need it, so a finished rank is never taken for a dead one.
  Status everyone_done() {
    MPI_Request req;
    KOLO_RETURN_IF_ERROR(ops_status(MPI_Ibarrier(t_->comm(), &req), "MPI_Ibarrier(KVStore)"));
    return t_->wait(&req, "waiting for every KVStore rank to close");
  }

  const int64_t bound_;
  std::unique_ptr<Transport> t_;
  uint64_t seq_ = 0;
  bool closed_ = false;
  int64_t moved_ = 0;          // value_bytes_moved()
  std::vector<uint8_t> wire_;  // a 16-bit pull reply before conversion
};

}  // namespace

std::unique_ptr<KVStore> make_dist_store(const std::string& type, const Config& config) {
  const detail::RuntimeLease lease;  // MPI stays up until the store is made (a collective)
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (config.num_servers <= 0 || config.num_servers >= size)
    throw Error(Status::invalid_argument("KVStore " + type + " needs KOLO_NUM_SERVERS between 1 and " +
                                         std::to_string(size - 1) + " (ranks: " + std::to_string(size) +
                                         "; the last KOLO_NUM_SERVERS ranks serve), got " +
                                         std::to_string(config.num_servers)));
  std::unique_ptr<Transport> t;
  throw_if_error(Transport::create(config, Roles{size - config.num_servers, config.num_servers}, &t));
  return std::make_unique<DistStore>(type, config, std::move(t));
}

}  // namespace kolo::kv
