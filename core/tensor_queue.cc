// The queue between training threads and the coordinator (see core/tensor_queue.h).
#include "core/tensor_queue.h"

namespace kolo {
namespace {

// Writes into *q the request for `view` under `name`: rank, kind, reduce op, root and scales
// from `header`, the rest from the view. Assignment keeps q's shape and name capacity.
void fill(Request* q, const Request& header, const std::string& name, const TensorView& view) {
  *q = header;
  q->name = name;
  q->shape = view.shape;
  q->dtype = view.dtype;
  q->device = view.device;
}

}  // namespace

void TensorQueue::queue_request(const Request& q, uint32_t slot) {
  if (num_requests_ < requests_.size()) requests_[num_requests_] = q;
  else requests_.push_back(q);
  if (num_requests_ < request_slots_.size()) request_slots_[num_requests_] = slot;
  else request_slots_.push_back(slot);
  ++num_requests_;
}

Status TensorQueue::refusal(const std::string& name, const Request& header) const {
  if (closed_) return close_reason_;
  if (join_)
    return Status::invalid_argument(std::string(op_kind_name(header.kind)) + " \"" + name + "\": rank " +
                                    std::to_string(header.rank) +
                                    " is in kolo::join() (it has no more data); collectives submitted before "
                                    "join() returns are refused");
  return Status::ok();
}

Status TensorQueue::duplicate(const std::string& name, const Request& header) {
  return Status::invalid_argument(std::string(op_kind_name(header.kind)) + " \"" + name +
                                  "\": submitted again on rank " + std::to_string(header.rank) +
                                  " while a collective under this name is still in flight; this "
                                  "submission is refused and the one in flight goes on (a name may be "
                                  "reused once its handle has completed)");
}

void TensorQueue::enqueue(uint32_t slot, const TensorView& view, const std::string& name, const Request& header,
                          std::shared_ptr<detail::HandleState> handle) {
  TensorEntry& e = entries_.value(slot);
  e.view = view;
  fill(&e.request, header, name, view);
  e.handle = std::move(handle);
  e.slot = slot;
  e.seq = ++pushed_;
  queue_request(e.request, slot);
}

bool TensorQueue::wake_locked() {
  // A coordinator that already has a wake-up pending needs no second one.
  if (note_push_times_.load(std::memory_order_relaxed))
    last_push_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  if (wake_) return false;
  // Stored on the change only: the coordinator polls wake_hint_ (maybe_work), so a store on
  // every push of a burst would pull its cache line back from the polling core each time.
  wake_ = true;
  wake_hint_.store(true, std::memory_order_release);
  return true;
}

bool TensorQueue::push(const TensorView& view, const std::string& name, const Request& header,
                       std::shared_ptr<detail::HandleState> handle, bool wake) {
  Status why;
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    why = refusal(name, header);
    if (why.is_ok()) {
      bool fresh = false;
      const uint32_t i = entries_.acquire(name, &fresh);
      // Duplicate: only this handle fails; the collective in flight goes on untouched.
      if (!fresh) {
        why = duplicate(name, header);
      } else {
        enqueue(i, view, name, header, std::move(handle));
        note_pending();
      }
    }
    notify = wake_locked() && wake;
  }
  if (notify) cv_.notify_one();
  if (!why.is_ok()) {
    handle->complete(why);
    return false;
  }
  return true;
}

bool TensorQueue::push_group(const std::vector<TensorView>& views, const Request& header,
                             std::vector<std::shared_ptr<detail::HandleState>>* handles, bool wake) {
  Status why;
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < views.size() && why.is_ok(); ++i) {
      const std::string& name = (*handles)[i]->name;
      why = refusal(name, header);
      if (why.is_ok() && entries_.find(name) >= 0) why = duplicate(name, header);
    }
    if (why.is_ok()) {
      for (size_t i = 0; i < views.size(); ++i) {
        bool fresh = false;
        const std::string& name = (*handles)[i]->name;
        enqueue(entries_.acquire(name, &fresh), views[i], name, header, std::move((*handles)[i]));
      }
      note_pending();
    }
    notify = wake_locked() && wake;
  }
  if (notify) cv_.notify_one();
  if (why.is_ok()) return true;
  for (auto& h : *handles) h->complete(why);
  return false;
}

size_t TensorQueue::take_requests(std::vector<Request>* out, std::vector<uint32_t>* slots) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = num_requests_;
  out->swap(requests_);
  if (slots) slots->swap(request_slots_);
  num_requests_ = 0;
  taken_upto_ = pushed_;
  wake_ = false;
  wake_hint_.store(false, std::memory_order_relaxed);
  return n;
}

bool TensorQueue::has_requests() {
  std::lock_guard<std::mutex> lock(mu_);
  return num_requests_ > 0;
}

Status TensorQueue::take_entries(const std::vector<std::string>& names, std::vector<TensorEntry>* out,
                                 bool skip_missing, int32_t process_set) {
  std::lock_guard<std::mutex> lock(mu_);
  taking_.clear();
  for (const std::string& n : names) {
    const int64_t i = entries_.find(n);
    if (i < 0 || !entries_.value(static_cast<uint32_t>(i)).handle) {  // absent, or taken already
      if (skip_missing) continue;
      out->clear();
      return Status::internal("rank 0 scheduled \"" + n + "\", which this rank has not submitted");
    }
    if (skip_missing && entries_.value(static_cast<uint32_t>(i)).seq > taken_upto_) continue;  // not sent yet
    if (const int32_t mine = entries_.value(static_cast<uint32_t>(i)).request.process_set; mine != process_set) {
      if (skip_missing) continue;  // the same name in flight in another set
      out->clear();
      return Status::internal("rank 0 scheduled \"" + n + "\" on process set " + std::to_string(process_set) +
                              ", but this rank submitted it on process set " + std::to_string(mine));
    }
    taking_.push_back(static_cast<uint32_t>(i));
  }
  move_taking(out);
  for (TensorEntry& e : *out) e.cache_hint = UINT32_MAX;
  return Status::ok();
}

Status TensorQueue::take_slots(const std::vector<uint32_t>& slots, const std::vector<uint32_t>& hints,
                               std::vector<TensorEntry>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t i : slots) {
    if (i >= entries_.capacity() || !entries_.in_use(i) || !entries_.value(i).handle ||
        entries_.value(i).seq > taken_upto_ || entries_.value(i).request.process_set != 0) {
      out->clear();
      return Status::internal("the fast path scheduled queue slot " + std::to_string(i) +
                              ", which holds no submitted collective of this rank's on the global set");
    }
  }
  taking_.assign(slots.begin(), slots.end());
  move_taking(out);
  for (size_t k = 0; k < out->size(); ++k) (*out)[k].cache_hint = k < hints.size() ? hints[k] : UINT32_MAX;
  return Status::ok();
}

void TensorQueue::move_taking(std::vector<TensorEntry>* out) {
  // Resize keeping element buffers: shrink into spare_, grow from it.
  const size_t count = taking_.size();
  while (out->size() > count) {
    spare_.push_back(std::move(out->back()));
    out->pop_back();
  }
  while (out->size() < count) {
    if (spare_.empty()) {
      out->emplace_back();
    } else {
      out->push_back(std::move(spare_.back()));
      spare_.pop_back();
    }
  }
  for (size_t k = 0; k < taking_.size(); ++k) {
    TensorEntry& from = entries_.value(taking_[k]);
    TensorEntry& to = (*out)[k];
    // Copy-assigned (cheaper than swapping here): both sides keep their buffers' capacity.
    to.view = from.view;
    to.request = from.request;
    to.handle = std::move(from.handle);  // a null handle marks the name as executing
    to.slot = taking_[k];
  }
}

size_t TensorQueue::pending_in_set(int32_t process_set) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  entries_.for_each_in_use([&](uint32_t i) { n += entries_.value(i).request.process_set == process_set ? 1 : 0; });
  return n;
}

void TensorQueue::release(const std::vector<TensorEntry>& entries) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const TensorEntry& e : entries) entries_.release(e.slot);
  note_pending();
}

Status TensorQueue::push_join(std::shared_ptr<detail::HandleState> handle) {
  Status closed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (join_)
      return Status::invalid_argument("kolo::join(): this rank is already in join() (called again before the "
                                      "first join's handle completed)");
    if (closed_) {
      closed = close_reason_;
    } else {
      join_ = handle;
      join_sent_ = false;
      join_unsent_.store(true);
      wake_ = true;
      wake_hint_.store(true, std::memory_order_release);
    }
  }
  if (!closed.is_ok()) {
    handle->complete(closed);
    return Status::ok();
  }
  cv_.notify_all();
  return Status::ok();
}

bool TensorQueue::take_join() {
  // A join pushed after this reading is taken by the next pass, as one pushed right after
  // the lock below would be; collectives pushed after it are refused, so none overtakes it.
  if (!join_unsent_.load()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (!join_ || join_sent_) return false;
  join_sent_ = true;
  join_unsent_.store(false);
  return true;
}

void TensorQueue::complete_join(Status s, int last_rank) {
  std::shared_ptr<detail::HandleState> h;
  {
    std::lock_guard<std::mutex> lock(mu_);
    h = std::move(join_);
    join_.reset();
    join_sent_ = false;
    join_unsent_.store(false);
  }
  if (!h) return;
  h->extra().join_last_rank = last_rank;  // read by the waiter only after complete()
  h->complete(std::move(s));
}

void TensorQueue::wait_for_work(std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return wake_ || closed_; });
}

void TensorQueue::notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
    wake_hint_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void TensorQueue::close(const Status& reason) {
  std::vector<std::shared_ptr<detail::HandleState>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_) {
      closed_ = true;
      close_reason_ = reason;
    }
    std::vector<uint32_t> in_use;
    entries_.for_each_in_use([&](uint32_t i) { in_use.push_back(i); });
    for (uint32_t i : in_use) {
      // Executing entries have no handle here: the coordinator completes them.
      if (auto& h = entries_.value(i).handle) pending.push_back(std::move(h));
      entries_.release(i);
    }
    note_pending();
    num_requests_ = 0;
    if (join_) pending.push_back(std::move(join_));
    join_.reset();
    join_unsent_.store(false);
  }
  cv_.notify_all();
  for (auto& h : pending) h->complete(reason);
}

}  // namespace kolo
