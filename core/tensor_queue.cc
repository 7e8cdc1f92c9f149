// The queue between training threads and the coordinator (see core/tensor_queue.h).
#include "core/tensor_queue.h"

namespace kolo {

bool TensorQueue::push(TensorEntry entry) {
  std::shared_ptr<detail::HandleState> failed;
  Status why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) {
      failed = entry.handle;
      why = close_reason_;
    } else if (entries_.count(entry.request.name)) {
      // Duplicate: this handle fails now; the flagged request fails the collective everywhere.
      failed = entry.handle;
      why = Status::invalid_argument(std::string(op_kind_name(entry.request.kind)) + " \"" +
                                     entry.request.name + "\": submitted twice on rank " +
                                     std::to_string(entry.request.rank) +
                                     " while the first was still in flight (names must be unique among "
                                     "pending collectives)");
      Request flagged = entry.request;
      flagged.duplicate = true;
      requests_.push_back(std::move(flagged));
    } else {
      requests_.push_back(entry.request);
      std::string name = entry.request.name;
      entries_.emplace(std::move(name), std::move(entry));
    }
    wake_ = true;
  }
  cv_.notify_one();
  if (failed) {
    failed->complete(why);
    return false;
  }
  return true;
}

std::vector<Request> TensorQueue::take_requests() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Request> out;
  out.swap(requests_);
  wake_ = false;
  return out;
}

bool TensorQueue::has_requests() {
  std::lock_guard<std::mutex> lock(mu_);
  return !requests_.empty();
}

Status TensorQueue::take_entries(const std::vector<std::string>& names, std::vector<TensorEntry>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  out->clear();
  out->reserve(names.size());
  for (const std::string& n : names) {
    auto it = entries_.find(n);
    if (it == entries_.end()) {
      // Put back what was taken so the caller can fail them properly.
      for (auto& e : *out) entries_.emplace(e.request.name, std::move(e));
      out->clear();
      return Status::internal("rank 0 scheduled \"" + n + "\", which this rank has not submitted");
    }
    out->push_back(std::move(it->second));
    entries_.erase(it);
  }
  return Status::ok();
}

void TensorQueue::wait_for_work(std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return wake_ || closed_; });
}

void TensorQueue::notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

void TensorQueue::close(const Status& reason) {
  std::unordered_map<std::string, TensorEntry> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_) {
      closed_ = true;
      close_reason_ = reason;
    }
    pending.swap(entries_);
    requests_.clear();
  }
  cv_.notify_all();
  for (auto& [name, e] : pending) e.handle->complete(reason);
}

}  // namespace kolo
