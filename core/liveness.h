// core/liveness.h — deciding, on every rank by itself, that a peer rank is dead.
//
// Why kolo needs it: a launcher that does not tear the job down when a rank dies
// (`mpirun --enable-recovery`, a host that drops off the network, another launcher) leaves
// the survivors waiting for the dead rank forever. Every wait of the coordinator thread
// that depends on a peer (the idle loop, the rendezvous, every MPI request, every
// shared-memory step) calls check(); once it reports a dead peer the runtime stops and
// every pending and later handle fails with that one error (docs/runtime.md, "Dead peers").
//
// How a peer is judged:
//   * on the same host (and where this process can see the peer's pid): by its process.
//     kill(pid, 0) failing with ESRCH, or /proc/<pid>/stat saying zombie/dead, means dead.
//     A stopped (SIGSTOP) or descheduled process is alive, however long it sleeps.
//   * on another host: by heartbeats. Each rank sends a one-byte message to every rank on
//     another host every timeout/5 (at most every second) from its waits, and a peer
//     from which nothing arrived for longer than the timeout (KOLO_PEER_TIMEOUT_SECONDS)
//     is presumed dead. Silence is only counted while this rank itself was checking: after
//     a gap in its own checks (it was stopped or descheduled), every peer gets a fresh period.
// The rank that finds a peer dead tells every other rank (a notice on the heartbeat tag), so
// that all survivors report the same dead rank, whichever of them saw it first.
// The verdict is sticky: once a peer is dead, check() returns the same error forever.
//
// Ownership: borrows the ControlChannel (heartbeats), which must outlive it.
// Thread safety: coordinator thread only (it sends and receives MPI messages); dead() may
// be read by another thread once the coordinator has stopped.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/backend.h"
#include "kolo/status.h"

namespace kolo {

// True while process `pid` exists and is neither a zombie nor dead (a stopped one is alive).
bool process_alive(int pid);

class Liveness {
 public:
  struct Peer {
    int pid = 0;
    int host = 0;           // same value = same host (pretend hosts under KOLO_TEST_RANKS_PER_HOST)
    std::string host_name;  // for messages
    bool by_pid = false;    // judged by its process (set by the constructor)
  };

  // `peers[r]` describes rank r (this rank included). Peers on this rank's host whose
  // process this process cannot see (another pid namespace) are judged by heartbeats.
  Liveness(int rank, std::vector<Peer> peers, std::chrono::milliseconds timeout, ControlChannel* channel);

  // Cheap unless a check is due (every 20 ms): ok, or the dead-peer error. `during` says
  // what this rank was waiting for ("waiting in MPI_Iallreduce"), for the message.
  Status check(const char* during) {
    if (!dead_.is_ok()) return dead_;
    const auto now = std::chrono::steady_clock::now();
    return now < next_check_ ? Status::ok() : check_now(during, now);
  }
  // A check now, whatever the schedule (after a transport error: is a peer behind it?).
  Status check_now(const char* during) { return check_now(during, std::chrono::steady_clock::now()); }

  const Status& dead() const { return dead_; }
  // "rank 3 (pid 1234 on host node7)".
  std::string describe(int rank) const;
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  Status check_now(const char* during, std::chrono::steady_clock::time_point now);
  void heartbeats(std::chrono::steady_clock::time_point now);
  void tell_others(int dead_rank);

  const int rank_;
  std::vector<Peer> peers_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds beat_every_;
  ControlChannel* const channel_;
  bool any_remote_ = false;
  std::vector<std::chrono::steady_clock::time_point> last_heard_;
  std::chrono::steady_clock::time_point next_check_{}, last_check_{}, next_beat_{};
  Status dead_;
};

}  // namespace kolo
