#include "ops/gloo_channel.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <utility>

#include "ops/gloo_common.h"

namespace kolo::ops {
namespace {
constexpr uint64_t kHeaderSlot = 1;
constexpr uint64_t kBodySlot = 2;
// The receiving thread's wait for the next header: as long as the job lives (liveness, not
// this wait, finds dead peers; stop() aborts it). Far below what steady_clock can add.
constexpr auto kForever = std::chrono::hours(24 * 365);
// How long stop() lets queued messages go before it drops them.
constexpr std::chrono::milliseconds kDrain{2000};

struct Header {
  uint32_t kind;
  uint32_t unused;
  uint64_t bytes;
};
static_assert(sizeof(Header) == 16);
}  // namespace

GlooChannel::GlooChannel(std::shared_ptr<gloo::Context> context, std::chrono::milliseconds timeout)
    : context_(std::move(context)), timeout_(timeout), rank_(context_->rank), size_(context_->size) {
  if (size_ > 1) {
    sender_ = std::thread([this] { send_loop(); });
    receiver_ = std::thread([this] { receive_loop(); });
  }
}

GlooChannel::~GlooChannel() { stop(); }

void GlooChannel::stop() {
  {
    // What is queued goes first, for a bounded while: a dead-peer notice queued as the
    // runtime stops must still reach the survivors (on MPI it leaves with the process).
    std::unique_lock<std::mutex> lock(mu_);
    const auto until = std::chrono::steady_clock::now() + std::min<std::chrono::milliseconds>(timeout_, kDrain);
    while (!stopping_ && error_.is_ok() && (!outgoing_.empty() || sending_ > 0) && sender_.joinable() &&
           std::chrono::steady_clock::now() < until) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock.lock();
    }
    stopping_ = true;
    for (auto* b : waiting_send_) b->abortWaitSend();
    if (waiting_recv_) waiting_recv_->abortWaitRecv();
  }
  wake_.notify_all();
  if (sender_.joinable()) sender_.join();
  if (receiver_.joinable()) receiver_.join();
}

void GlooChannel::fail(const Status& s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.is_ok()) error_ = s;
}

Status GlooChannel::enqueue(Kind kind, std::vector<uint8_t> bytes, std::vector<int> dests) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.is_ok()) return error_;
  if (stopping_) return Status::aborted("the control channel is closed");
  outgoing_.push_back({kind, std::make_shared<const std::vector<uint8_t>>(std::move(bytes)), std::move(dests)});
  wake_.notify_one();
  return Status::ok();
}

Status GlooChannel::send_to_root(std::vector<uint8_t> message) {
  return enqueue(Kind::kRequest, std::move(message), {0});
}

Status GlooChannel::send_to_all(std::vector<uint8_t> message) {
  std::vector<int> dests;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) dests.push_back(r);
  return enqueue(Kind::kResponse, std::move(message), std::move(dests));
}

Status GlooChannel::send_heartbeat(int peer, const std::string& notice) {
  return enqueue(notice.empty() ? Kind::kHeartbeat : Kind::kNotice,
                 std::vector<uint8_t>(notice.begin(), notice.end()), {peer});
}

Status GlooChannel::pop(std::deque<Incoming>& queue, int* source, std::vector<uint8_t>* message, bool* got) {
  std::lock_guard<std::mutex> lock(mu_);
  *got = !queue.empty();
  if (*got) {
    if (source) *source = queue.front().source;
    *message = std::move(queue.front().bytes);
    queue.pop_front();
    return Status::ok();
  }
  return error_;  // what arrived before an error is still delivered first
}

Status GlooChannel::poll_from_peers(int* source, std::vector<uint8_t>* message, bool* got) {
  return pop(requests_, source, message, got);
}

Status GlooChannel::poll_from_root(std::vector<uint8_t>* message, bool* got) {
  return pop(responses_, nullptr, message, got);
}

Status GlooChannel::poll_heartbeat(int* source, std::string* notice, bool* got) {
  std::vector<uint8_t> bytes;
  KOLO_RETURN_IF_ERROR(pop(beats_, source, &bytes, got));
  if (*got) notice->assign(bytes.begin(), bytes.end());
  return Status::ok();
}

Status GlooChannel::progress(size_t* in_flight) {
  std::lock_guard<std::mutex> lock(mu_);
  *in_flight = outgoing_.size() + sending_;
  return error_;
}

void GlooChannel::send_loop() {
  for (;;) {
    Outgoing m;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !outgoing_.empty(); });
      if (stopping_) return;
      m = std::move(outgoing_.front());
      outgoing_.pop_front();
      sending_ = 1;
    }
    Status s = send_one(m);
    {
      std::lock_guard<std::mutex> lock(mu_);
      sending_ = 0;
    }
    if (!s.is_ok()) fail(s);  // sticky; later messages (notices above all) still go
  }
}

// Posts the header and the bytes to every destination, then waits until Gloo has sent them
// all (bounded by timeout_; stop() aborts the wait). A destination that fails (its pair
// closed: the peer is gone) does not hold up the others. Heartbeats and notices are fire and
// forget (a peer that cannot be reached is the dead-peer check's to judge); a request or a
// response list that cannot be sent is the channel's error.
Status GlooChannel::send_one(const Outgoing& m) {
  Header h{static_cast<uint32_t>(m.kind), 0, m.bytes->size()};
  struct Post {
    int dest;
    std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  };
  std::vector<Post> posts;
  std::vector<int> failed;
  Status why;
  for (int dest : m.dests) {
    Status s = gloo_call("sending a control message to rank " + std::to_string(dest), [&] {
      posts.push_back({dest, context_->createUnboundBuffer(&h, sizeof(h))});
      posts.back().buf->send(dest, kHeaderSlot);
      if (m.bytes->empty()) return;
      posts.push_back({dest, context_->createUnboundBuffer(const_cast<uint8_t*>(m.bytes->data()), m.bytes->size())});
      posts.back().buf->send(dest, kBodySlot);
    });
    if (!s.is_ok()) failed.push_back(dest), why = s;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status::ok();
    for (auto& p : posts) waiting_send_.push_back(p.buf.get());
  }
  bool aborted = false;
  for (auto& p : posts) {
    if (std::find(failed.begin(), failed.end(), p.dest) != failed.end()) continue;
    Status s = gloo_call("sending a control message to rank " + std::to_string(p.dest),
                         [&] { aborted = !p.buf->waitSend(timeout_); });
    if (!s.is_ok()) failed.push_back(p.dest), why = s;
    if (aborted) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  waiting_send_.clear();
  if (aborted || failed.empty() || m.kind == Kind::kHeartbeat || m.kind == Kind::kNotice) return Status::ok();
  return why;
}

void GlooChannel::receive_loop() {
  Header h{};
  std::unique_ptr<gloo::transport::UnboundBuffer> header;
  std::vector<int> others;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) others.push_back(r);
  Status s = gloo_call("receiving control messages", [&] { header = context_->createUnboundBuffer(&h, sizeof(h)); });
  while (s.is_ok()) {
    int source = -1;
    bool completed = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      waiting_recv_ = header.get();
    }
    s = gloo_call("receiving a control message", [&] {
      header->recv(others, kHeaderSlot);
      completed = header->waitRecv(&source, kForever);
    });
    if (!s.is_ok() || !completed) break;
    Incoming in{source, std::vector<uint8_t>(h.bytes)};
    if (h.bytes > 0) {
      std::unique_ptr<gloo::transport::UnboundBuffer> body;
      s = gloo_call("receiving a control message from rank " + std::to_string(source), [&] {
        body = context_->createUnboundBuffer(in.bytes.data(), in.bytes.size());
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (stopping_) {
            completed = false;
            return;
          }
          waiting_recv_ = body.get();
        }
        body->recv(source, kBodySlot);
        completed = body->waitRecv(timeout_);
      });
      if (!completed && s.is_ok()) break;  // stop()
      if (!s.is_ok()) {
        // The sender's pair closed mid-message (it died): drop the message and go on
        // listening to the others; the dead-peer check names it.
        s = Status::ok();
        std::lock_guard<std::mutex> lock(mu_);
        waiting_recv_ = nullptr;  // `body` goes now
        continue;
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    waiting_recv_ = nullptr;
    switch (static_cast<Kind>(h.kind)) {
      case Kind::kRequest: requests_.push_back(std::move(in)); break;
      case Kind::kResponse: responses_.push_back(std::move(in)); break;
      case Kind::kHeartbeat:
      case Kind::kNotice: beats_.push_back(std::move(in)); break;
      default:
        s = Status::internal("control message of unknown kind " + std::to_string(h.kind) + " from rank " +
                             std::to_string(source));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_recv_ = nullptr;
  }
  if (!s.is_ok()) fail(s);
}

}  // namespace kolo::ops
