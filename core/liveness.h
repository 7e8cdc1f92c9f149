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
//     A stopped (SIGSTOP) or descheduled process is alive, however long it sleeps. Judged
//     in check(), i.e. from the coordinator's waits.
//   * on another host: by heartbeats. Each rank sends a one-byte message to every rank on
//     another host every timeout/5 (at most every second), and a peer from which nothing
//     arrived for longer than the timeout (KOLO_PEER_TIMEOUT_SECONDS) is presumed dead.
//     Where the channel may be used from a second thread (MPI_THREAD_MULTIPLE), dedicated
//     threads send, receive and judge heartbeats: they sleep between beats and do
//     microseconds of work per beat, so a coordinator busy with CPU work (or starved by
//     compute threads) neither stops its rank's heartbeats nor delays their receipt. Two
//     threads, because MPI's calls can be held up: at load 20 an MPI_Improbe on the
//     heartbeat tag took up to 1.5 s (it runs MPI's progress engine, shared with the
//     coordinator's transfers). The listener thread sends and reads the UDP datagrams and
//     judges; the MPI heartbeat thread sends and reads the MPI heartbeats and notices. A
//     held-up MPI call delays neither this rank's datagrams nor its verdicts; a peer heard
//     only over MPI is judged by its silence up to the start of the MPI thread's latest
//     completed poll (what arrived later could not have been read yet).
//     Otherwise check() does it from the coordinator's waits (the older, starvable path).
//     Each heartbeat goes both as an MPI message and, where set up, as a UDP datagram
//     (core/heartbeat_socket.h): MPI's TCP stream can hold it behind bulk data for seconds.
//     A peer heard over UDP is judged by the kernel's arrival time (SO_TIMESTAMPNS), so a
//     starved listener still finds a dead peer on time. After a gap in the listener's own
//     schedule (the process was stopped, or starved past timeout/2) a peer heard only over
//     MPI (whose arrival time is unknown) gets a fresh period.
// The rank that finds a peer dead tells every other rank (a notice on the heartbeat tag), so
// that all survivors report the same dead rank, whichever of them saw it first.
// The verdict is sticky: once a peer is dead, check() returns the same error forever.
//
// Ownership: borrows the ControlChannel (heartbeats), which must outlive it (or stop()).
// Thread safety: check()/check_now() on the coordinator thread only; the listener and MPI
// heartbeat threads are internal; dead() may be read by any thread once check() has returned an error (or once the
// coordinator has stopped); stop() from the thread that owns the object.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/heartbeat_socket.h"
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
  // `listener_thread`: heartbeats on a dedicated thread (the channel's heartbeat calls must
  // be safe from two threads at once); false: from check().
  // `udp` (may be null): a second path for heartbeats, set up with every peer's endpoint
  // (core/heartbeat_socket.h); a peer is heard when either path delivers.
  Liveness(int rank, std::vector<Peer> peers, std::chrono::milliseconds timeout, ControlChannel* channel,
           bool listener_thread, std::unique_ptr<HeartbeatSocket> udp = nullptr);
  ~Liveness();  // stop()
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  // Cheap unless a check is due (every 20 ms): ok, or the dead-peer error. `during` says
  // what this rank was waiting for ("waiting in MPI_Iallreduce"), for the message.
  Status check(const char* during) { return check(during, std::chrono::steady_clock::now()); }
  // The same with the caller's clock reading `now` (the coordinator's pass reads it once).
  Status check(const char* during, std::chrono::steady_clock::time_point now) {
    if (has_dead_.load(std::memory_order_acquire)) return dead_;
    return now < next_check_ ? Status::ok() : check_now(during, now);
  }
  // A check now, whatever the schedule (after a transport error: is a peer behind it?).
  Status check_now(const char* during) { return check_now(during, std::chrono::steady_clock::now()); }

  // Ends the listener and MPI heartbeat threads (bounded: each sleeps at most a beat). Heartbeats stop; judging by
  // pid goes on. Called before the channel goes away; idempotent.
  void stop();

  // This rank's coordinator stopped on an error of its own (`why`): the verdict becomes
  // "rank R (pid P on host H) stopped: <why>", and every peer is told as a dead peer's
  // finder tells them, so their pending and later handles fail naming this rank within a
  // heartbeat poll. Returns the verdict (an earlier one, if a peer was already dead).
  Status announce_stop(const Status& why);

  // The verdict: ok while no peer is known dead.
  Status dead() const { return has_dead_.load(std::memory_order_acquire) ? dead_ : Status::ok(); }
  // "rank 3 (pid 1234 on host node7)".
  std::string describe(int rank) const;
  std::chrono::milliseconds timeout() const { return timeout_; }
  bool has_listener_thread() const { return listener_.joinable(); }
  // Test hook (KOLO_TEST_LISTENER_GAP_SECONDS): the listener sleeps this long after every
  // tick, as a thread starved by a loaded host would.
  void set_test_gap(std::chrono::milliseconds gap) { test_gap_ms_.store(gap.count()); }
  // Test hook (KOLO_TEST_MPI_HEARTBEAT_STALL_SECONDS): every poll of the MPI heartbeat
  // thread takes this long more, as an MPI call held up in MPI's progress engine would.
  void set_test_mpi_stall(std::chrono::milliseconds stall) { test_mpi_stall_ms_.store(stall.count()); }

 private:
  using Clock = std::chrono::steady_clock;
  Status check_now(const char* during, Clock::time_point now);
  // Heartbeats and notices that have arrived over MPI; then mpi_polled_at_ = now.
  void receive_mpi(Clock::time_point now);
  void receive_udp(Clock::time_point now);  // datagrams, with their arrival times
  // To every heartbeat-judged peer, when due.
  void beat_mpi(Clock::time_point now);
  void beat_udp(Clock::time_point now);
  void heard(size_t rank, int64_t at);  // last_heard_[rank] = max(it, at)
  void fresh_period(Clock::time_point now);
  // After a thread did not run for over timeout/2: a fresh period for every peer not heard
  // over UDP (`all`: for everyone; the listener passes whether the kernel dropped datagrams).
  void fresh_unless_udp(Clock::time_point now, bool all);
  Status silent_peer(Clock::time_point now, const std::string& noticed);  // a heartbeat verdict
  // Records the verdict unless one exists; true (and the others told) if this one is it.
  bool set_dead(Status s, int dead_rank, bool tell);
  void listen(bool mpi_side);  // the listener (UDP, verdicts) or the MPI heartbeat thread

  const int rank_;
  std::vector<Peer> peers_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds beat_every_;
  ControlChannel* const channel_;
  std::unique_ptr<HeartbeatSocket> udp_;  // used by one thread at a time, like next_udp_beat_
  bool any_remote_ = false;
  std::unique_ptr<std::atomic<int64_t>[]> last_heard_;  // steady_clock ns, per rank
  std::unique_ptr<std::atomic<bool>[]> udp_heard_;      // per rank: a datagram has come
  // steady_clock ns: when the latest completed MPI poll began (all that had arrived by then was read).
  std::atomic<int64_t> mpi_polled_at_{0};
  std::atomic<int64_t> test_gap_ms_{0}, test_mpi_stall_ms_{0};
  Clock::time_point next_check_{}, last_check_{};
  Clock::time_point next_udp_beat_{}, next_mpi_beat_{};  // each used by one thread at a time

  std::mutex mu_;  // guards dead_'s writes and the listener's stop
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread listener_, mpi_listener_;
  std::atomic<bool> has_dead_{false};
  Status dead_;  // written once, under mu_, before has_dead_ is set
};

}  // namespace kolo
