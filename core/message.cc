// Binary codec for core/message.h. Little-endian, length-prefixed; a magic byte and a
// version lead each list so a stray or corrupt message is recognised, not misread.
#include "core/message.h"

#include <cstring>
#include <type_traits>

namespace kolo {
namespace {

constexpr uint8_t kRequestMagic = 0xA7;
constexpr uint8_t kResponseMagic = 0xB3;
// 5: alltoall, reducescatter, grouped; 6: join; 7: process sets; 8: set cache ids; 9: refusals;
// 10: the ranks an error ends (Response::ranks, on errors only)
constexpr uint8_t kVersion = 10;
// No sane message has more entries than this; larger counts mean corruption.
constexpr uint64_t kMaxCount = 1u << 26;

class Writer {
 public:
  template <class T>
  void pod(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void u8(uint8_t v) { out_.push_back(v); }
  void str(const std::string& s) {
    pod<uint32_t>(static_cast<uint32_t>(s.size()));
    const size_t at = out_.size();
    out_.resize(at + s.size());
    if (!s.empty()) std::memcpy(out_.data() + at, s.data(), s.size());
  }
  void i64s(const std::vector<int64_t>& v) {
    pod<uint32_t>(static_cast<uint32_t>(v.size()));
    for (int64_t x : v) pod(x);
  }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  template <class T>
  bool pod(T* v) {
    if (n_ - pos_ < sizeof(T)) return fail();
    std::memcpy(v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool u8(uint8_t* v) { return pod(v); }
  bool count(uint32_t* c, size_t min_item_bytes) {
    if (!pod(c)) return false;
    if (*c > kMaxCount || static_cast<uint64_t>(*c) * min_item_bytes > n_ - pos_) return fail();
    return true;
  }
  bool str(std::string* s) {
    uint32_t len;
    if (!count(&len, 1)) return false;
    s->assign(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return true;
  }
  bool i64s(std::vector<int64_t>* v) {
    uint32_t c;
    if (!count(&c, 8)) return false;
    v->resize(c);
    for (auto& x : *v) pod(&x);
    return true;
  }
  bool at_end() const { return pos_ == n_; }
  size_t pos() const { return pos_; }
  bool ok() const { return ok_; }

 private:
  bool fail() {
    ok_ = false;
    return false;
  }
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  bool ok_ = true;
};

template <class E>
bool enum_in_range(uint8_t v, int count, E* out) {
  if (v >= count) return false;
  *out = static_cast<E>(v);
  return true;
}

void put_device(Writer& w, const Device& d) {
  w.u8(static_cast<uint8_t>(d.kind));
  w.pod<int32_t>(d.id);
}
bool get_device(Reader& r, Device* d) {
  uint8_t k;
  int32_t id;
  if (!r.u8(&k) || !r.pod(&id) || k > 1) return false;
  d->kind = static_cast<Device::Kind>(k);
  d->id = id;
  return true;
}

Status corrupt(const char* what, const Reader& r) {
  return Status::internal(std::string("corrupt ") + what + " message (byte " + std::to_string(r.pos()) + ")");
}

bool get_request(Reader& r, Request* q) {
  uint8_t kind, op, dt;
  return r.pod(&q->rank) && r.u8(&kind) && enum_in_range(kind, kNumOpKinds, &q->kind) && r.u8(&op) &&
         enum_in_range(op, kNumReduceOps, &q->reduce_op) && r.u8(&dt) && enum_in_range(dt, kNumDTypes, &q->dtype) &&
         get_device(r, &q->device) && r.pod(&q->root) && r.pod(&q->prescale) && r.pod(&q->postscale) &&
         r.i64s(&q->shape) && r.str(&q->name) && r.i64s(&q->splits) && r.str(&q->group) &&
         r.pod(&q->group_size) && r.pod(&q->process_set) && q->process_set >= 0 && r.str(&q->refused);
}

void put_i32s(Writer& w, const std::vector<int32_t>& v) {
  w.pod<uint32_t>(static_cast<uint32_t>(v.size()));
  for (int32_t x : v) w.pod(x);
}
bool get_i32s(Reader& r, std::vector<int32_t>* v) {
  uint32_t c;
  if (!r.count(&c, 4)) return false;
  v->resize(c);
  for (auto& x : *v) r.pod(&x);
  return true;
}

bool get_response(Reader& r, Response* s) {
  uint8_t type, dt, op;
  uint32_t n;
  if (!r.u8(&type) || !enum_in_range(type, Response::kNumTypes, &s->type) || !r.count(&n, 4)) return false;
  s->names.resize(n);
  for (auto& name : s->names)
    if (!r.str(&name)) return false;
  return r.u8(&dt) && enum_in_range(dt, kNumDTypes, &s->dtype) && r.u8(&op) &&
         enum_in_range(op, kNumReduceOps, &s->reduce_op) && get_device(r, &s->device) && r.pod(&s->root) &&
         r.pod(&s->prescale) && r.pod(&s->postscale) && r.i64s(&s->sizes) && r.str(&s->error) &&
         get_i32s(r, &s->joined) && r.i64s(&s->row_shape) && r.pod(&s->process_set) && s->process_set >= 0 &&
         (s->type == Response::Type::kError ? get_i32s(r, &s->ranks) : (s->ranks.clear(), true));
}

}  // namespace

std::vector<uint8_t> encode(const RequestList& list) {
  Writer w;
  w.u8(kRequestMagic);
  w.u8(kVersion);
  w.u8(static_cast<uint8_t>((list.shutdown ? 1 : 0) | (list.shutdown_ack ? 2 : 0) | (list.join ? 4 : 0)));
  w.str(list.shutdown_reason);
  w.pod<uint32_t>(static_cast<uint32_t>(list.requests.size()));
  for (const Request& q : list.requests) {
    w.pod(q.rank);
    w.u8(static_cast<uint8_t>(q.kind));
    w.u8(static_cast<uint8_t>(q.reduce_op));
    w.u8(static_cast<uint8_t>(q.dtype));
    put_device(w, q.device);
    w.pod(q.root);
    w.pod(q.prescale);
    w.pod(q.postscale);
    w.i64s(q.shape);
    w.str(q.name);
    w.i64s(q.splits);
    w.str(q.group);
    w.pod(q.group_size);
    w.pod(q.process_set);
    w.str(q.refused);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(list.cached.size()));
  for (uint32_t id : list.cached) w.pod(id);
  w.pod<uint32_t>(static_cast<uint32_t>(list.set_cached.size()));
  for (const CachedInSet& c : list.set_cached) {
    w.pod(c.process_set);
    w.pod(c.id);
  }
  return w.take();
}

std::vector<uint8_t> encode(const ResponseList& list) {
  Writer w;
  w.u8(kResponseMagic);
  w.u8(kVersion);
  w.u8(static_cast<uint8_t>((list.shutdown ? 1 : 0) | (list.has_params ? 2 : 0) | (list.join_done ? 4 : 0) |
                            (list.fast_pause ? 8 : 0) | (!list.fast_demote.empty() ? 16 : 0)));
  w.str(list.shutdown_reason);
  if (list.join_done) w.pod(list.last_joined);
  if (list.has_params) {
    w.pod(list.fusion_threshold_bytes);
    w.pod(list.cycle_time_ms);
    w.pod(list.cpu_chunk_bytes);
  }
  if (!list.fast_demote.empty()) {
    w.pod<uint32_t>(static_cast<uint32_t>(list.fast_demote.size()));
    for (const auto& n : list.fast_demote) w.str(n);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(list.responses.size()));
  for (const Response& s : list.responses) {
    w.u8(static_cast<uint8_t>(s.type));
    w.pod<uint32_t>(static_cast<uint32_t>(s.names.size()));
    for (const auto& n : s.names) w.str(n);
    w.u8(static_cast<uint8_t>(s.dtype));
    w.u8(static_cast<uint8_t>(s.reduce_op));
    put_device(w, s.device);
    w.pod(s.root);
    w.pod(s.prescale);
    w.pod(s.postscale);
    w.i64s(s.sizes);
    w.str(s.error);
    put_i32s(w, s.joined);
    w.i64s(s.row_shape);
    w.pod(s.process_set);
    if (s.type == Response::Type::kError) put_i32s(w, s.ranks);
  }
  return w.take();
}

Status decode(const uint8_t* data, size_t size, RequestList* out) {
  Reader r(data, size);
  uint8_t magic, version, flags;
  uint32_t n;
  RequestList list;
  if (!r.u8(&magic) || magic != kRequestMagic || !r.u8(&version) || version != kVersion || !r.u8(&flags) ||
      flags > 7 || !r.str(&list.shutdown_reason) || !r.count(&n, 20))
    return corrupt("request", r);
  list.shutdown = flags & 1;
  list.shutdown_ack = flags & 2;
  list.join = flags & 4;
  list.requests.resize(n);
  for (auto& q : list.requests)
    if (!get_request(r, &q)) return corrupt("request", r);
  uint32_t ncached;
  if (!r.count(&ncached, 4)) return corrupt("request", r);
  list.cached.resize(ncached);
  for (auto& id : list.cached) r.pod(&id);
  if (!r.count(&ncached, 8)) return corrupt("request", r);
  list.set_cached.resize(ncached);
  for (auto& c : list.set_cached) r.pod(&c.process_set), r.pod(&c.id);
  if (!r.at_end()) return corrupt("request", r);
  *out = std::move(list);
  return Status::ok();
}

Status decode(const uint8_t* data, size_t size, ResponseList* out) {
  Reader r(data, size);
  uint8_t magic, version, flags;
  uint32_t n;
  ResponseList list;
  if (!r.u8(&magic) || magic != kResponseMagic || !r.u8(&version) || version != kVersion || !r.u8(&flags) ||
      flags > 31 || !r.str(&list.shutdown_reason))
    return corrupt("response", r);
  list.shutdown = flags & 1;
  list.has_params = flags & 2;
  list.join_done = flags & 4;
  list.fast_pause = flags & 8;
  if (list.join_done && (!r.pod(&list.last_joined) || list.last_joined < 0)) return corrupt("response", r);
  if (list.has_params && (!r.pod(&list.fusion_threshold_bytes) || !r.pod(&list.cycle_time_ms) ||
                          !r.pod(&list.cpu_chunk_bytes) || !(list.cycle_time_ms > 0) || list.cpu_chunk_bytes == 0))
    return corrupt("response", r);
  if (flags & 16) {
    uint32_t nd;
    if (!r.count(&nd, 4) || nd == 0) return corrupt("response", r);
    list.fast_demote.resize(nd);
    for (auto& name : list.fast_demote)
      if (!r.str(&name)) return corrupt("response", r);
  }
  if (!r.count(&n, 20)) return corrupt("response", r);
  list.responses.resize(n);
  for (auto& s : list.responses)
    if (!get_response(r, &s)) return corrupt("response", r);
  if (!r.at_end()) return corrupt("response", r);
  *out = std::move(list);
  return Status::ok();
}

}  // namespace kolo
