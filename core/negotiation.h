// core/negotiation.h — rank 0's bookkeeping of which rank submitted which tensor, and the
// decision of what every rank executes. A pure component: requests in, responses out; no
// MPI, no threads, no clock of its own (time is passed in), so it is tested without peers.
//
// A name becomes a Response once every rank has submitted it. If the ranks disagree (kind,
// dtype, reduce op, shape, root, scale factors, device) or one submitted it twice while in
// flight, the Response is an error whose message names the tensor, the ranks and the values,
// e.g.  allreduce "fc1.w": shape [120,400] on ranks 0,2 but [120,401] on rank 1
//
// Thread safety: none; owned and used by the coordinator thread of rank 0.
#pragma once

#include <chrono>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/message.h"

namespace kolo {

class MessageTable {
 public:
  using Clock = std::chrono::steady_clock;
  explicit MessageTable(int world_size);

  // Records one rank's request. Requests with a rank outside [0, size) are rejected.
  // *first (optional) tells whether this was the first request seen for the name.
  Status add(const Request& request, Clock::time_point now = Clock::now(), bool* first = nullptr);
  // Responses for the names now submitted by every rank, in the order they completed.
  std::vector<Response> take_ready();

  struct Pending {
    std::string name;
    OpKind kind;
    std::vector<int> missing_ranks;
    std::vector<int> ready_ranks;
    double waited_seconds;
  };
  // Names some but not all ranks have submitted, waiting longer than `min_wait_seconds`.
  std::vector<Pending> stalled(double min_wait_seconds, Clock::time_point now = Clock::now()) const;
  size_t num_pending() const { return slots_.size(); }

 private:
  struct Slot {
    std::vector<Request> by_rank;  // index = rank; valid where `have` is set
    std::vector<bool> have;
    int count = 0;
    std::string poison;  // non-empty: the collective fails with this message
    Clock::time_point first_seen;
  };
  Response build(const std::string& name, Slot& slot) const;

  int size_;
  std::unordered_map<std::string, Slot> slots_;
  std::vector<std::string> completed_;  // names complete since the last take_ready
};

// Describes how the ranks disagree on one attribute: "shape [2,3] on ranks 0,2 but [2,4] on
// rank 1". `values[r]` is rank r's value as text. Empty when all agree.
std::string describe_disagreement(const char* attribute, const std::vector<std::string>& values);
// "0,2,5"
std::string join_ranks(const std::vector<int>& ranks);

}  // namespace kolo
