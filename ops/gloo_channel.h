// ops/gloo_channel.h — the ControlChannel over Gloo's unbound buffers, on a Gloo context of
// its own (kolo's control context; the collectives run on another, so their slots and
// connections never meet).
//
// Every message travels as a fixed 16-byte header (its kind and length) on one slot, then
// its bytes on another, between any two ranks: requests to rank 0, response lists from it,
// heartbeats and dead-peer notices to anyone (core/liveness.h).
//
// Why two threads: Gloo's waits cannot be polled. A UnboundBuffer wait that times out closes
// every pair of the context ("Application timeout caused pair closure"), and an aborted wait
// cannot tell whether its operation completed. So a receiving thread waits, without a
// timeout, for the next header from any peer (then, bounded, for its bytes) and queues what
// arrives; a sending thread posts each queued message to its destinations and waits,
// bounded, until Gloo has sent them. The ControlChannel's calls only move messages in and out
// of those queues, so they never block. A dead peer does not hold the receiving thread (it
// waits for any peer; a message cut off by its sender's death is dropped); the runtime learns
// of it from core/liveness.h. A request or response list that Gloo cannot send (the peer's
// connection closed, or the timeout passed: a peer that stopped reading) is the channel's
// error, which every later call returns; heartbeats and notices are fire and forget, and the
// sending thread goes on with them (a dead-peer notice must still reach the survivors). One
// sending thread: a message to a peer that stopped reading holds the later ones up to the
// timeout.
//
// Ownership: shares the context with the backend; owns its threads, which stop() ends.
// Thread safety: send_heartbeat and poll_heartbeat from any thread (the liveness threads);
// the others from the coordinator thread. stop() from the thread that owns the channel.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}  // namespace gloo

namespace kolo::ops {

class GlooChannel final : public ControlChannel {
 public:
  // `context`: the control context (every rank of the job); `timeout` bounds a send and the
  // wait for a message's bytes once its header has come. Starts both threads.
  GlooChannel(std::shared_ptr<gloo::Context> context, std::chrono::milliseconds timeout);
  ~GlooChannel() override;  // stop()
  GlooChannel(const GlooChannel&) = delete;
  GlooChannel& operator=(const GlooChannel&) = delete;

  Status send_to_root(std::vector<uint8_t> message) override;
  Status send_to_all(std::vector<uint8_t> message) override;
  Status poll_from_peers(int* source, std::vector<uint8_t>* message, bool* got) override;
  Status poll_from_root(std::vector<uint8_t>* message, bool* got) override;
  Status progress(size_t* in_flight) override;
  Status send_heartbeat(int peer, const std::string& notice) override;
  Status poll_heartbeat(int* source, std::string* notice, bool* got) override;

  // Ends both threads: queued messages get up to 2 s (less with a shorter timeout) to go,
  // then the waits are aborted and what is left is dropped. Bounded; idempotent.
  void stop();

 private:
  enum class Kind : uint32_t { kRequest = 1, kResponse = 2, kHeartbeat = 3, kNotice = 4 };
  struct Outgoing {
    Kind kind;
    std::shared_ptr<const std::vector<uint8_t>> bytes;
    std::vector<int> dests;
  };
  struct Incoming {
    int source;
    std::vector<uint8_t> bytes;
  };
  Status enqueue(Kind kind, std::vector<uint8_t> bytes, std::vector<int> dests);
  Status pop(std::deque<Incoming>& queue, int* source, std::vector<uint8_t>* message, bool* got);
  void send_loop();
  void receive_loop();
  Status send_one(const Outgoing& m);
  void fail(const Status& s);  // records the first error of either thread

  const std::shared_ptr<gloo::Context> context_;
  const std::chrono::milliseconds timeout_;
  const int rank_, size_;

  std::mutex mu_;
  std::condition_variable wake_;  // the sending thread waits here for messages
  bool stopping_ = false;                                 // guarded by mu_
  std::deque<Outgoing> outgoing_;                         // guarded by mu_
  size_t sending_ = 0;                                    // guarded by mu_: 1 while a message is out
  std::deque<Incoming> requests_, responses_, beats_;     // guarded by mu_
  Status error_;                                          // guarded by mu_
  // The waits in progress, for stop() to abort (guarded by mu_; owned by the threads).
  std::vector<gloo::transport::UnboundBuffer*> waiting_send_;
  gloo::transport::UnboundBuffer* waiting_recv_ = nullptr;
  std::thread sender_, receiver_;
};

}  // namespace kolo::ops
