// fork()ed ranks with a pipe-based out-of-band channel: test/shm/fork_ranks.h.
#include "test/shm/fork_ranks.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

namespace kolo::shm::testing {
namespace {

// Child -> parent messages: 'A' + one byte (agree vote), 'V' + 4-byte length + text (verdict).
// Parent -> child: one byte, the agreed value.
bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = write(fd, c, n);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

struct Child {
  pid_t pid = -1;
  int up = -1;    // parent reads
  int down = -1;  // parent writes
  bool open = true;
  bool voted = false;
  bool vote = false;
  RankOutcome outcome;
};

[[noreturn]] void run_child(int rank, int up, int down, const RankBody& body) {
  const ShmGroup::Agree agree = [up, down](bool ok, bool* all) -> Status {
    const char msg[2] = {'A', static_cast<char>(ok ? 1 : 0)};
    char reply = 0;
    if (!write_all(up, msg, 2) || !read_all(down, &reply, 1)) {
      return Status::communication("test harness: the parent's pipe broke");
    }
    *all = reply != 0;
    return Status::ok();
  };
  std::string verdict = body(rank, agree);
  const uint32_t len = static_cast<uint32_t>(verdict.size());
  const char tag = 'V';
  write_all(up, &tag, 1);
  write_all(up, &len, 4);
  write_all(up, verdict.data(), len);
  _exit(0);  // no atexit handlers or Catch2 reporting in the child
}

// Reads one message from child c; false when its pipe closed.
bool serve_one(Child& c) {
  char tag = 0;
  if (!read_all(c.up, &tag, 1)) return false;
  if (tag == 'A') {
    char v = 0;
    if (!read_all(c.up, &v, 1)) return false;
    c.voted = true;
    c.vote = v != 0;
    return true;
  }
  uint32_t len = 0;
  if (!read_all(c.up, &len, 4)) return false;
  c.outcome.verdict.resize(len);
  if (len > 0 && !read_all(c.up, c.outcome.verdict.data(), len)) return false;
  c.outcome.reported = true;
  return true;
}

// When every child still open has voted, answer all of them. A child that is gone counts
// as a "no", so the others fail create() instead of waiting for it.
void settle_votes(std::vector<Child>& kids) {
  bool all = true;
  for (const Child& c : kids) {
    if (c.open && !c.voted) return;
    if (!c.open || !c.vote) all = false;
  }
  const char reply = all ? 1 : 0;
  for (Child& c : kids) {
    if (c.voted && c.open) write_all(c.down, &reply, 1);
    c.voted = false;
  }
}

}  // namespace

std::vector<RankOutcome> fork_ranks(int n, const RankBody& body,
                                    std::chrono::milliseconds deadline) {
  std::vector<Child> kids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) std::abort();
    const pid_t pid = fork();
    if (pid == 0) {
      close(up[0]);
      close(down[1]);
      run_child(i, up[1], down[0], body);
    }
    close(up[1]);
    close(down[0]);
    kids[i].pid = pid;
    kids[i].up = up[0];
    kids[i].down = down[1];
  }
  const auto end = std::chrono::steady_clock::now() + deadline;
  int open = n;
  while (open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    std::vector<pollfd> fds;
    for (const Child& c : kids) fds.push_back({c.open ? c.up : -1, POLLIN, 0});
    if (poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0) continue;
    for (size_t i = 0; i < kids.size(); ++i) {
      if (!kids[i].open || fds[i].revents == 0) continue;
      if (!serve_one(kids[i])) {
        kids[i].open = false;
        --open;
      }
    }
    settle_votes(kids);
  }
  std::vector<RankOutcome> out;
  for (Child& c : kids) {
    if (c.open) {  // past the deadline: stop it and say so
      kill(c.pid, SIGKILL);
      c.outcome.verdict = "still running at the test's deadline (killed)";
      c.outcome.reported = true;
    }
    int st = 0;
    waitpid(c.pid, &st, 0);
    if (WIFSIGNALED(st)) {
      c.outcome.killed = true;
      c.outcome.signal = WTERMSIG(st);
    }
    close(c.up);
    close(c.down);
    out.push_back(c.outcome);
  }
  return out;
}

std::string unique_segment_name() {
  static std::atomic<int> counter{0};
  return "/kolo-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

bool segment_exists(const std::string& name) {
  struct stat st {};
  return stat(("/dev/shm" + name).c_str(), &st) == 0;
}

std::string failures(const std::vector<RankOutcome>& outcomes) {
  std::string s;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const RankOutcome& o = outcomes[i];
    if (o.reported && o.verdict.empty()) continue;
    s += "rank " + std::to_string(i) + ": ";
    s += o.reported ? o.verdict : (o.killed ? "killed by signal " + std::to_string(o.signal)
                                            : "exited without a verdict");
    s += "; ";
  }
  return s;
}

}  // namespace kolo::shm::testing
