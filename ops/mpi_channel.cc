#include "ops/mpi_channel.h"

#include <algorithm>
#include <climits>

#include "ops/mpi_util.h"

namespace kolo::ops {
namespace {
constexpr int kRequestTag = 101;
constexpr int kResponseTag = 102;
constexpr int kHeartbeatTag = 103;
const char kHeartbeat = 0;  // what a heartbeat carries (only its arrival matters)
}  // namespace

MpiChannel::MpiChannel(MPI_Comm control_comm) : comm_(control_comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiChannel::~MpiChannel() {
  // Anything still queued here is undeliverable (a peer is gone); release it.
  for (auto& s : sends_) {
    MPI_Cancel(&s.request);
    MPI_Request_free(&s.request);
  }
}

Status MpiChannel::send(std::shared_ptr<std::vector<uint8_t>> bytes, int dest, int tag) {
  if (bytes->size() > static_cast<size_t>(INT_MAX))
    return Status::internal("control message of " + std::to_string(bytes->size()) + " bytes is too large");
  InFlight f{bytes, MPI_REQUEST_NULL};
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Isend(bytes->data(), static_cast<int>(bytes->size()), MPI_BYTE, dest, tag,
                                            comm_, &f.request),
                                  "sending a control message to rank " + std::to_string(dest)));
  sends_.push_back(std::move(f));
  return Status::ok();
}

Status MpiChannel::send_to_root(std::vector<uint8_t> message) {
  return send(std::make_shared<std::vector<uint8_t>>(std::move(message)), 0, kRequestTag);
}

Status MpiChannel::send_to_all(std::vector<uint8_t> message) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(std::move(message));
  for (int r = 0; r < size_; ++r)
    if (r != rank_) KOLO_RETURN_IF_ERROR(send(bytes, r, kResponseTag));
  return Status::ok();
}

Status MpiChannel::poll(int source, int tag, int* from, std::vector<uint8_t>* message, bool* got) {
  int flag = 0;
  MPI_Message msg;
  MPI_Status st;
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Improbe(source, tag, comm_, &flag, &msg, &st), "probing control messages"));
  *got = flag != 0;
  if (!flag) return Status::ok();
  int count = 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
  message->resize(static_cast<size_t>(count));
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Mrecv(message->data(), count, MPI_BYTE, &msg, MPI_STATUS_IGNORE),
                                  "receiving a control message from rank " + std::to_string(st.MPI_SOURCE)));
  if (from) *from = st.MPI_SOURCE;
  return Status::ok();
}

Status MpiChannel::poll_from_peers(int* source, std::vector<uint8_t>* message, bool* got) {
  return poll(MPI_ANY_SOURCE, kRequestTag, source, message, got);
}

Status MpiChannel::poll_from_root(std::vector<uint8_t>* message, bool* got) {
  return poll(0, kResponseTag, nullptr, message, got);
}

Status MpiChannel::progress(size_t* in_flight) {
  while (!sends_.empty()) {
    int done = 0;
    KOLO_RETURN_IF_ERROR(mpi_status(MPI_Test(&sends_.front().request, &done, MPI_STATUS_IGNORE),
                                    "completing a control message"));
    if (!done) break;
    sends_.pop_front();
  }
  *in_flight = sends_.size();
  return Status::ok();
}

}  // namespace kolo::ops

namespace kolo::ops {

void MpiChannel::abandon() {
  static auto* kept = new std::vector<std::shared_ptr<std::vector<uint8_t>>>();  // never freed, on purpose
  for (auto& s : sends_) kept->push_back(std::move(s.bytes));
  sends_.clear();
}

Status MpiChannel::send_heartbeat(int peer, const std::string& notice) {
  // Fire and forget: the request is freed at once (MPI completes it in the background), so
  // a heartbeat to a dead peer holds nothing up.
  MPI_Request req;
  const void* data = notice.empty() ? static_cast<const void*>(&kHeartbeat) : notice.data();
  const int n = notice.empty() ? 1 : static_cast<int>(std::min<size_t>(notice.size(), INT_MAX));
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Isend(data, n, MPI_BYTE, peer, kHeartbeatTag, comm_, &req),
                                  "sending a heartbeat to rank " + std::to_string(peer)));
  MPI_Request_free(&req);
  return Status::ok();
}

Status MpiChannel::poll_heartbeat(int* source, std::string* notice, bool* got) {
  int flag = 0;
  MPI_Message msg;
  MPI_Status st;
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Improbe(MPI_ANY_SOURCE, kHeartbeatTag, comm_, &flag, &msg, &st),
                                  "probing heartbeats"));
  *got = flag != 0;
  if (!flag) return Status::ok();
  int count = 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
  std::vector<char> bytes(static_cast<size_t>(std::max(count, 1)));
  KOLO_RETURN_IF_ERROR(
      mpi_status(MPI_Mrecv(bytes.data(), count, MPI_BYTE, &msg, MPI_STATUS_IGNORE), "receiving a heartbeat"));
  *source = st.MPI_SOURCE;
  if (count > 1) notice->assign(bytes.data(), static_cast<size_t>(count));
  else notice->clear();
  return Status::ok();
}

}  // namespace kolo::ops
