// The parameter server's loop: kvstore/server.h.
#include "kvstore/server.h"

#include <algorithm>
#include <cstring>

#include "kvstore/wire.h"

namespace kolo::kv {

Status Server::run() {
  const std::string during = "serving as KVStore " + describe_rank(t_.roles(), t_.rank());
  for (int idle = 0; closed_ < t_.roles().workers;) {
    Header h;
    int source = -1;
    bool got = false;
    KOLO_RETURN_IF_ERROR(t_.poll(kTagRequest, &h, &source, &got));
    size_t pending = 0;
    KOLO_RETURN_IF_ERROR(t_.progress(&pending));
    if (got) {
      idle = 0;
      KOLO_RETURN_IF_ERROR(handle(h, source));
      continue;
    }
    KOLO_RETURN_IF_ERROR(t_.idle(idle++, during.c_str()));
  }
  return t_.flush(during.c_str());
}

std::string Server::where(const Header& h) const {
  if (h.op == Op::kSetOptimizer || h.op == Op::kLoadState || h.op == Op::kCheckState || h.op == Op::kSaveState)
    return std::string(op_name(h.op)) + " on KVStore " + describe_rank(t_.roles(), t_.rank());  // no key
  return std::string(op_name(h.op)) + " of key " + std::to_string(h.key) + " (elements " + std::to_string(h.offset) +
         ".." + std::to_string(h.offset + h.size) + " of " + std::to_string(h.total) + ") on KVStore " +
         describe_rank(t_.roles(), t_.rank());
}

Status Server::receive(const Header& h, int source, void* into) {
  if (h.payload_bytes <= 0) return Status::ok();
  if (into == nullptr) {
    scratch_.resize(static_cast<size_t>((h.payload_bytes + 3) / 4));
    into = scratch_.data();
  }
  const std::string during = "receiving the payload of a " + std::string(op_name(h.op)) + " from " +
                             describe_rank(t_.roles(), source);
  return t_.receive_payload(source, kTagRequest, into, h.payload_bytes, during.c_str());
}

Status Server::receive_values(const Header& h, int source, float* into) {
  const auto dtype = static_cast<DType>(h.dtype);
  if (dtype == DType::kFloat32) return receive(h, source, into);
  wire_.resize(static_cast<size_t>(std::max<int64_t>(h.payload_bytes, 0)));
  KOLO_RETURN_IF_ERROR(receive(h, source, wire_.data()));
  from_wire(wire_.data(), h.size, dtype, into);
  return Status::ok();
}

Status Server::reply(int dest, const Header& request, const void* payload, int64_t bytes) {
  Header r = request;
  r.failed = 0;
  r.payload_bytes = bytes;
  return t_.send(dest, r, payload, kTagReply);
}

Status Server::reply_error(int dest, const Header& request, const std::string& message) {
  auto text = std::make_shared<std::string>(message);
  Header r = request;
  r.failed = 1;
  r.payload_bytes = static_cast<int64_t>(text->size());
  return t_.send(dest, r, text->data(), kTagReply, text);
}

Status Server::handle(const Header& h, int source) {
  if (h.op == Op::kStop) {
    ++closed_;
    return Status::ok();
  }
  if (h.op == Op::kSetOptimizer || h.op == Op::kLoadState || h.op == Op::kCheckState) {
    std::vector<uint8_t> bytes(static_cast<size_t>(std::max<int64_t>(h.payload_bytes, 0)));
    KOLO_RETURN_IF_ERROR(receive(h, source, bytes.data()));
    Status s;
    if (h.op == Op::kSetOptimizer) {
      KVOptimizer o;
      s = decode(bytes.data(), bytes.size(), &o);
      if (s.is_ok()) optimizer_ = std::make_unique<Updater>(o);
    } else if (!optimizer_) {
      s = Status::invalid_argument("load_optimizer_states before set_optimizer: " + describe_rank(t_.roles(), t_.rank()) +
                                   " has no optimizer to load into");
    } else {
      std::vector<std::pair<std::pair<int, int64_t>, int64_t>> owned;
      for (const auto& [where, slice] : slices_) owned.push_back({where, static_cast<int64_t>(slice.weight.size())});
      s = optimizer_->load(bytes.data(), bytes.size(), owned, h.op == Op::kLoadState);
    }
    return s.is_ok() ? reply(source, h) : reply_error(source, h, s.message() + " (" + where(h) + ")");
  }
  if (h.op == Op::kSaveState) {
    auto blob = std::make_shared<std::vector<uint8_t>>(optimizer_ ? optimizer_->save() : std::vector<uint8_t>{});
    Header r = h;
    r.payload_bytes = static_cast<int64_t>(blob->size());
    return t_.send(source, r, blob->data(), kTagReply, blob);
  }
  const auto dtype = static_cast<DType>(h.dtype);
  const bool dtype_ok = h.dtype >= 0 && h.dtype <= static_cast<int32_t>(DType::kFloat64) && wire_dtype_ok(dtype);
  const int64_t bytes = dtype_ok ? h.size * wire_size(dtype) : -1;  // on the wire
  if (h.size <= 0 || h.offset < 0 || h.offset + h.size > h.total || !dtype_ok ||
      (h.op != Op::kPull && h.payload_bytes != bytes)) {
    KOLO_RETURN_IF_ERROR(receive(h, source, nullptr));
    return reply_error(source, h, "malformed request: " + where(h));
  }
  auto it = slices_.find({h.key, h.offset});
  if (h.op == Op::kInit) {
    if (it != slices_.end()) {
      KOLO_RETURN_IF_ERROR(receive(h, source, nullptr));
      return reply_error(source, h, "key " + std::to_string(h.key) + " is already initialised (" + where(h) + ")");
    }
    Slice& s = slices_[{h.key, h.offset}];
    s.total = h.total;
    s.dtype = dtype;
    s.weight.resize(static_cast<size_t>(h.size));
    KOLO_RETURN_IF_ERROR(receive_values(h, source, s.weight.data()));
    return reply(source, h);
  }
  if (it == slices_.end() || it->second.total != h.total || static_cast<int64_t>(it->second.weight.size()) != h.size) {
    KOLO_RETURN_IF_ERROR(receive(h, source, nullptr));
    std::string why = "key " + std::to_string(h.key) + " was never initialised";
    for (const auto& [k, s] : slices_)
      if (k.first == h.key) {
        why = "key " + std::to_string(h.key) + " was initialised with " + std::to_string(s.total) +
              " elements but this request has " + std::to_string(h.total);
        break;
      }
    return reply_error(source, h, why + ": " + where(h) + ", from " + describe_rank(t_.roles(), source));
  }
  Slice& s = it->second;
  if (dtype != s.dtype) {
    KOLO_RETURN_IF_ERROR(receive(h, source, nullptr));
    return reply_error(source, h, "key " + std::to_string(h.key) + " was initialised as " + std::string(dtype_name(s.dtype)) +
                                      " but this request carries " + std::string(dtype_name(dtype)) + ": " + where(h) + ", from " +
                                      describe_rank(t_.roles(), source));
  }
  if (h.op == Op::kPush) return push(h, source, s);
  // Pull. dist_sync: the weights change only once every worker has pushed again, which this
  // worker does after this reply is received, so the weights are sent in place. dist_async:
  // another worker's push may change them while the send is in flight: send a copy.
  // A 16-bit key is sent as a 16-bit copy.
  if (sync_ && dtype == DType::kFloat32) return reply(source, h, s.weight.data(), bytes);
  auto copy = std::make_shared<std::vector<float>>(s.weight);
  if (!sync_ && optimizer_ && optimizer_->options().lookahead && !custom_)
    optimizer_->look_ahead(h.key, h.offset, *copy);
  Header r = h;
  r.failed = 0;
  r.payload_bytes = bytes;
  if (dtype == DType::kFloat32) return t_.send(source, r, copy->data(), kTagReply, copy);
  auto wire = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(bytes));
  to_wire(copy->data(), h.size, dtype, wire->data());
  return t_.send(source, r, wire->data(), kTagReply, wire);
}

Status Server::push(const Header& h, int source, Slice& s) {
  if (!sync_) {
    scratch_.resize(static_cast<size_t>(h.size));
    KOLO_RETURN_IF_ERROR(receive_values(h, source, scratch_.data()));
    apply(h.key, h.offset, s, scratch_);
    return reply(source, h);
  }
  for (const auto& w : s.waiting)
    if (w.first == source) {
      KOLO_RETURN_IF_ERROR(receive(h, source, nullptr));
      return reply_error(source, h, "a second push in one dist_sync round: " + where(h));
    }
  if (s.waiting.empty()) {
    s.sum.resize(static_cast<size_t>(h.size));
    KOLO_RETURN_IF_ERROR(receive_values(h, source, s.sum.data()));
  } else {
    scratch_.resize(static_cast<size_t>(h.size));
    KOLO_RETURN_IF_ERROR(receive_values(h, source, scratch_.data()));
    for (size_t i = 0; i < s.sum.size(); ++i) s.sum[i] += scratch_[i];
  }
  s.waiting.push_back({source, h.seq});
  if (static_cast<int>(s.waiting.size()) < t_.roles().workers) return Status::ok();
  apply(h.key, h.offset, s, s.sum);
  Header r = h;
  for (const auto& [worker, seq] : s.waiting) {
    r.seq = seq;
    KOLO_RETURN_IF_ERROR(reply(worker, r));
  }
  s.waiting.clear();
  return Status::ok();
}

void Server::apply(int key, int64_t offset, Slice& s, const std::vector<float>& grad) {
  if (custom_) {
    custom_(key, offset, grad, s.weight);
  } else if (optimizer_) {
    optimizer_->apply(key, offset, grad, s.weight);
  } else {
    std::copy(grad.begin(), grad.end(), s.weight.begin());  // MXNet without an updater: store the sum
  }
}

}  // namespace kolo::kv
