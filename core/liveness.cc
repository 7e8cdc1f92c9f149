// Dead-peer detection: core/liveness.h.
#include "core/liveness.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
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

Liveness::Liveness(int rank, std::vector<Peer> peers, milliseconds timeout, ControlChannel* channel)
    : rank_(rank),
      peers_(std::move(peers)),
      timeout_(timeout),
      beat_every_(std::clamp(timeout / 5, milliseconds(10), milliseconds(1000))),
      channel_(channel) {
  const int my_host = peers_[static_cast<size_t>(rank_)].host;
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (static_cast<int>(r) == rank_) continue;
    Peer& p = peers_[r];
    p.by_pid = p.host == my_host && process_alive(p.pid);
    if (!p.by_pid) any_remote_ = true;
  }
  const auto now = Clock::now();
  last_heard_.assign(peers_.size(), now);
  last_check_ = now;
}

std::string Liveness::describe(int rank) const {
  const Peer& p = peers_.at(static_cast<size_t>(rank));
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(p.pid) + " on host " + p.host_name + ")";
}

void Liveness::heartbeats(Clock::time_point now) {
  std::string notice;
  for (int i = 0; i < 10000; ++i) {
    int from = -1;
    bool got = false;
    if (!channel_->poll_heartbeat(&from, &notice, &got).is_ok() || !got) break;
    if (from < 0 || static_cast<size_t>(from) >= last_heard_.size()) continue;
    last_heard_[static_cast<size_t>(from)] = now;
    if (!notice.empty() && dead_.is_ok()) {
      dead_ = Status::aborted(notice);  // the finder's words: every survivor reports the same
      KOLO_LOG(LogLevel::kError, dead_.message());
    }
  }
  if (!any_remote_ || now < next_beat_) return;
  next_beat_ = now + beat_every_;
  for (size_t r = 0; r < peers_.size(); ++r)
    if (static_cast<int>(r) != rank_ && !peers_[r].by_pid) channel_->send_heartbeat(static_cast<int>(r), {});
}

void Liveness::tell_others(int dead_rank) {
  // Every survivor stops with the same cause, instead of one that later finds its peers
  // (which stopped, and may have exited) silent. The text must outlive the sends.
  static auto* text = new std::string();
  *text = dead_.message();
  for (size_t r = 0; r < peers_.size(); ++r)
    if (static_cast<int>(r) != rank_ && static_cast<int>(r) != dead_rank)
      channel_->send_heartbeat(static_cast<int>(r), *text);
}

Status Liveness::check_now(const char* during, Clock::time_point now) {
  if (!dead_.is_ok()) return dead_;
  next_check_ = now + kCheckEvery;
  // This rank did not check for a while (it was stopped, descheduled, or busy outside a
  // wait): it could not have heard anyone, so nobody's silence counts from before.
  if (now - last_check_ > timeout_ / 2) std::fill(last_heard_.begin(), last_heard_.end(), now);
  heartbeats(now);  // also a peer's notice that someone died
  last_check_ = now;
  if (!dead_.is_ok()) return dead_;
  for (size_t r = 0; r < peers_.size(); ++r) {
    const int peer = static_cast<int>(r);
    if (peer == rank_) continue;
    const Peer& p = peers_[r];
    std::string why;
    if (p.by_pid) {
      if (process_alive(p.pid)) continue;
      // It may have exited because it was told of another rank's death: that notice, sent
      // before it could exit, reached this rank too. Give MPI a few polls to deliver it.
      for (int i = 0; i < 50 && dead_.is_ok(); ++i) {
        heartbeats(now);
        if (dead_.is_ok()) std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (!dead_.is_ok()) return dead_;
      why = "its process is gone (rank " + std::to_string(rank_) + " on the same host checks its pid)";
    } else {
      const auto silent = now - last_heard_[r];
      if (silent <= timeout_) continue;
      why = "rank " + std::to_string(rank_) + " (host " + peers_[static_cast<size_t>(rank_)].host_name +
            ") has heard nothing from it for " + seconds_text(silent) + " (KOLO_PEER_TIMEOUT_SECONDS=" +
            knob_text(timeout_) + ")";
    }
    dead_ = Status::aborted("peer lost: " + describe(peer) + " is dead: " + why + ", noticed while " + during);
    KOLO_LOG(LogLevel::kError, dead_.message());
    tell_others(peer);
    return dead_;
  }
  return Status::ok();
}

}  // namespace kolo
