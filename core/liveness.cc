// Dead-peer detection: core/liveness.h.
#include "core/liveness.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/logging.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kCheckEvery(20);

std::string seconds_text(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

std::string knob_text(milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

}  // namespace

bool process_alive(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A killed process whose parent has not reaped it yet still answers kill(); its state in
  // /proc says it is gone (Z = zombie, X = dead). T (stopped) is alive.
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return !(kill(pid, 0) != 0 && errno == ESRCH);  // gone since, or no /proc
  char buf[512];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');  // the name may contain spaces or ')'
  if (close_paren == nullptr || close_paren[1] == '\0') return true;
  const char state = close_paren[2];
  return state != 'Z' && state != 'X';
}

Liveness::Liveness(int rank, std::vector<Peer> peers, milliseconds timeout, ControlChannel* channel,
                   bool listener_thread, std::unique_ptr<HeartbeatSocket> udp)
    : rank_(rank),
      peers_(std::move(peers)),
      timeout_(timeout),
      beat_every_(std::clamp(timeout / 5, milliseconds(10), milliseconds(1000))),
      channel_(channel),
      udp_(std::move(udp)),
      last_heard_(new std::atomic<int64_t>[peers_.size()]),
      udp_heard_(new std::atomic<bool>[peers_.size()]) {
  const int my_host = peers_[static_cast<size_t>(rank_)].host;
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (static_cast<int>(r) == rank_) continue;
    Peer& p = peers_[r];
    p.by_pid = p.host == my_host && process_alive(p.pid);
    if (!p.by_pid) any_remote_ = true;
  }
  const auto now = Clock::now();
  for (size_t r = 0; r < peers_.size(); ++r) udp_heard_[r].store(false, std::memory_order_relaxed);
  fresh_period(now);
  mpi_polled_at_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  last_check_ = now;
  if (any_remote_ && listener_thread) {
    listener_ = std::thread([this] { listen(false); });
    mpi_listener_ = std::thread([this] { listen(true); });
  }
}

Liveness::~Liveness() { stop(); }

void Liveness::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (listener_.joinable()) listener_.join();
  if (mpi_listener_.joinable()) mpi_listener_.join();
}

std::string Liveness::describe(int rank) const {
  const Peer& p = peers_.at(static_cast<size_t>(rank));
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(p.pid) + " on host " + p.host_name + ")";
}

void Liveness::fresh_period(Clock::time_point now) {
  const int64_t t = now.time_since_epoch().count();
  for (size_t r = 0; r < peers_.size(); ++r) last_heard_[r].store(t, std::memory_order_relaxed);
}

void Liveness::heard(size_t rank, int64_t at) {
  int64_t seen = last_heard_[rank].load(std::memory_order_relaxed);
  while (at > seen && !last_heard_[rank].compare_exchange_weak(seen, at, std::memory_order_relaxed)) {
  }
}

void Liveness::receive_mpi(Clock::time_point now) {
  std::string notice;
  for (int i = 0; i < 10000; ++i) {
    int from = -1;
    bool got = false;
    if (!channel_->poll_heartbeat(&from, &notice, &got).is_ok() || !got) break;
    if (from < 0 || static_cast<size_t>(from) >= peers_.size()) continue;
    heard(static_cast<size_t>(from), now.time_since_epoch().count());
    // The finder's words: every survivor reports the same.
    if (!notice.empty()) set_dead(Status::aborted(notice), -1, false);
  }
  mpi_polled_at_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
}

void Liveness::receive_udp(Clock::time_point now) {
  // The kernel's arrival time, not the read time: a receiver starved or stopped since still
  // knows when the peer last spoke (core/heartbeat_socket.h).
  Clock::time_point at;
  for (int i = 0, from = -1; udp_ && i < 10000 && udp_->poll(&from, &at); ++i) {
    const auto r = static_cast<size_t>(from);
    heard(r, std::min(at, now).time_since_epoch().count());
    udp_heard_[r].store(true, std::memory_order_relaxed);
  }
}

void Liveness::fresh_unless_udp(Clock::time_point now, bool all) {
  const int64_t t = now.time_since_epoch().count();
  for (size_t r = 0; r < peers_.size(); ++r)
    if (all || !udp_heard_[r].load(std::memory_order_relaxed)) heard(r, t);
}

void Liveness::beat_mpi(Clock::time_point now) {
  if (!any_remote_ || now < next_mpi_beat_) return;
  next_mpi_beat_ = now + beat_every_;
  for (size_t r = 0; r < peers_.size(); ++r)
    if (static_cast<int>(r) != rank_ && !peers_[r].by_pid) channel_->send_heartbeat(static_cast<int>(r), {});
}

void Liveness::beat_udp(Clock::time_point now) {
  if (!any_remote_ || !udp_ || now < next_udp_beat_) return;
  next_udp_beat_ = now + beat_every_;
  for (size_t r = 0; r < peers_.size(); ++r)
    if (static_cast<int>(r) != rank_ && !peers_[r].by_pid) udp_->send(static_cast<int>(r));
}

bool Liveness::set_dead(Status s, int dead_rank, bool tell) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (has_dead_.load(std::memory_order_relaxed)) return false;
    dead_ = std::move(s);
    has_dead_.store(true, std::memory_order_release);
  }
  KOLO_LOG(LogLevel::kError, dead_.message());
  if (!tell) return true;
  // Every survivor stops with the same cause, instead of one that later finds its peers
  // (which stopped, and may have exited) silent. The text must outlive the sends (MPI may
  // read it after this object is gone); only the one verdict of the process gets here.
  static auto* text = new std::string();
  *text = dead_.message();
  for (size_t r = 0; r < peers_.size(); ++r)
    if (static_cast<int>(r) != rank_ && static_cast<int>(r) != dead_rank)
      channel_->send_heartbeat(static_cast<int>(r), *text);
  return true;
}

Status Liveness::announce_stop(const Status& why) {
  set_dead(Status::aborted(describe(rank_) + " stopped: " + why.message()), rank_, true);
  return dead();
}

Status Liveness::silent_peer(Clock::time_point now, const std::string& noticed) {
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (static_cast<int>(r) == rank_ || peers_[r].by_pid) continue;
    // A peer heard only over MPI: what it sent after the MPI thread's latest completed poll
    // began may be waiting unread behind a held-up MPI call, so its silence ends there.
    auto until = now;
    if (!udp_heard_[r].load(std::memory_order_relaxed))
      until = std::min(now, Clock::time_point(Clock::duration(mpi_polled_at_.load(std::memory_order_relaxed))));
    const auto silent = until - Clock::time_point(Clock::duration(last_heard_[r].load(std::memory_order_relaxed)));
    if (silent <= timeout_) continue;
    const std::string why = "rank " + std::to_string(rank_) + " (host " + peers_[static_cast<size_t>(rank_)].host_name +
                            ") has heard nothing from it for " + seconds_text(silent) +
                            " (KOLO_PEER_TIMEOUT_SECONDS=" + knob_text(timeout_) + ")";
    set_dead(Status::aborted("peer lost: " + describe(static_cast<int>(r)) + " is dead: " + why + ", noticed " + noticed),
             static_cast<int>(r), true);
    return dead();
  }
  return Status::ok();
}

void Liveness::listen(bool mpi_side) {
  // The tick is a fraction of a beat: a heartbeat is received within a tick of its arrival,
  // and a silence is judged within a tick of passing the timeout.
  const auto tick = std::max(beat_every_ / 4, milliseconds(5));
  auto last = Clock::now();
  milliseconds hook_slept(0);  // the test hook's sleep in the previous tick (not a stall)
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_ && !has_dead_.load(std::memory_order_relaxed)) {
    wake_.wait_for(lock, tick);
    if (stopping_) break;
    lock.unlock();
    const auto now = Clock::now();
    // This thread did not run for a while (the process was stopped, or the host starved it
    // far beyond a tick). What arrived meanwhile over UDP carries the kernel's arrival times,
    // so those peers' silence is known (a dead one is still found on time); a peer heard only
    // over MPI could not have been heard, so its silence counts from now.
    const bool gap = now - last > timeout_ / 2;
    // This rank sent no datagram either: its peers on other hosts came close to declaring it
    // dead, or did. Said here, because the rank's own output is otherwise silent about it (a
    // host starved of CPU for seconds, as simulated hosts sharing one kernel can be:
    // docs/hosts.md, "Heartbeat timeout on simulated hosts").
    if (!mpi_side && now - last - hook_slept > timeout_ * 4 / 5)
      KOLO_LOG(LogLevel::kWarning, "the heartbeat thread did not run for "
                                       << seconds_text(now - last - hook_slept)
                                       << " (this process was stopped, or starved of CPU); peers on other hosts heard "
                                          "nothing from this rank meanwhile (KOLO_PEER_TIMEOUT_SECONDS="
                                       << knob_text(timeout_) << ")");
    last = now;
    if (mpi_side) {
      if (const int64_t ms = test_mpi_stall_ms_.load(std::memory_order_relaxed); ms > 0)  // a held-up MPI call
        std::this_thread::sleep_for(milliseconds(ms));
      if (gap) fresh_unless_udp(now, false);
      receive_mpi(now);
      beat_mpi(now);
    } else {
      receive_udp(now);
      if (gap) fresh_unless_udp(now, udp_ && udp_->take_dropped());
      beat_udp(now);
      silent_peer(now, "by the heartbeat thread");
      hook_slept = milliseconds(test_gap_ms_.load(std::memory_order_relaxed));
      if (hook_slept.count() > 0) std::this_thread::sleep_for(hook_slept);  // a starved thread
    }
    lock.lock();
  }
}

Status Liveness::check_now(const char* during, Clock::time_point now) {
  if (has_dead_.load(std::memory_order_acquire)) return dead_;
  next_check_ = now + kCheckEvery;
  const bool threaded = listener_.joinable();
  if (!threaded) {
    // This rank did not check for a while (it was stopped, descheduled, or busy outside a
    // wait): it could not have heard anyone, so nobody's silence counts from before.
    const bool gap = now - last_check_ > timeout_ / 2;
    receive_mpi(now);  // also a peer's notice that someone died
    receive_udp(now);
    if (gap) fresh_unless_udp(now, udp_ && udp_->take_dropped());
    beat_mpi(now);
    beat_udp(now);
    last_check_ = now;
    if (!dead().is_ok()) return dead();
  }
  for (size_t r = 0; r < peers_.size(); ++r) {
    const int peer = static_cast<int>(r);
    if (peer == rank_ || !peers_[r].by_pid || process_alive(peers_[r].pid)) continue;
    // It may have exited because it was told of another rank's death: that notice, sent
    // before it could exit, reached this rank too. Give MPI a few polls to deliver it.
    for (int i = 0; i < 50 && dead().is_ok(); ++i) {
      receive_mpi(now);
      if (dead().is_ok()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (!dead().is_ok()) return dead();
    const std::string why = "its process is gone (rank " + std::to_string(rank_) + " on the same host checks its pid)";
    set_dead(Status::aborted("peer lost: " + describe(peer) + " is dead: " + why + ", noticed while " + during), peer,
             true);
    return dead();
  }
  if (!threaded) return silent_peer(now, std::string("while ") + during);
  return Status::ok();
}

}  // namespace kolo
