// kolo::Handle and its shared state (see kolo/handle.h, core/handle_state.h).
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <ctime>
#include <new>
#include <utility>

#include "core/handle_state.h"
#include "core/wait_help.h"

namespace kolo {
namespace detail {
namespace {

// While a group executes, its waiting threads are woken at most this often (and never for a
// group that completes within it), as a loop of synchronize() over the members would be.
// Why, measured (docs/collectives.md, "Grouped collectives and the scheduler"): on a loaded
// machine a process whose only waiting thread sleeps through a long group keeps just its
// fair share of the core its coordinator is bound to, and peers that step in lockstep stall
// on each other's time slices: the ResNet-50 set grouped took 2.5-3.6x as long as the same
// tensors one by one. With the waiter woken every 200 us it takes the same time (0.97-1.01x).
constexpr auto kGroupWakePeriod = std::chrono::microseconds(200);

// make_handle_state's blocks. Every state's block has one size (the shared_ptr control block
// with the state in place), so a thread keeps up to kKeptBlocks freed blocks of the first
// size it frees and hands them to its next states. Per thread, so nothing is shared and no
// lock is taken; bounded, so a thread that only frees (a coordinator completing handles the
// user dropped) keeps little. The cache is trivially destructible, so it is still usable
// from thread-exit code that runs after `t_flush` has emptied it (it then passes through).
constexpr size_t kKeptBlocks = 32;
// Blocks start on a cache line: the state's hot fields then fill as few lines as they can.
constexpr std::align_val_t kBlockAlign{64};
struct BlockCache {
  size_t bytes;  // the block size kept (0: none yet)
  size_t count;
  bool armed;    // t_flush is registered for this thread
  bool closed;   // the thread is exiting: no more keeping
  void* blocks[kKeptBlocks];
};
thread_local BlockCache t_cache{};
struct BlockFlush {
  ~BlockFlush() {
    for (size_t i = 0; i < t_cache.count; ++i) ::operator delete(t_cache.blocks[i], kBlockAlign);
    t_cache.count = 0;
    t_cache.closed = true;
  }
};
thread_local BlockFlush t_flush;

void* take_block(size_t bytes) {
  if (bytes == t_cache.bytes && t_cache.count > 0) return t_cache.blocks[--t_cache.count];
  return ::operator new(bytes, kBlockAlign);
}

void give_block(void* p, size_t bytes) {
  BlockCache& c = t_cache;
  if (!c.closed && !c.armed) {
    static_cast<void>(&t_flush);  // registers the flush at this thread's exit
    c.armed = true;
  }
  if (c.bytes == 0) c.bytes = bytes;
  if (!c.closed && bytes == c.bytes && c.count < kKeptBlocks) {
    c.blocks[c.count++] = p;
    return;
  }
  ::operator delete(p, kBlockAlign);
}

// The allocator make_handle_state gives std::allocate_shared (which rebinds it to its block).
template <typename T>
struct BlockAllocator {
  using value_type = T;
  BlockAllocator() = default;
  template <typename U>
  explicit BlockAllocator(const BlockAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(take_block(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { give_block(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const BlockAllocator<U>&) const { return true; }
};

// HandleState::sleep_word's values.
constexpr uint32_t kNobodySleeps = 0, kSleepers = 1, kCompleted = 2;

// Sleeps while *word == expected, until woken, a signal, or `deadline` (CLOCK_MONOTONIC,
// which steady_clock reads; null: none). Spurious returns are the caller's to handle.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, const timespec* deadline) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected, deadline,
          nullptr, FUTEX_BITSET_MATCH_ANY);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, nullptr, nullptr, 0);
}

// Sleeps on `s` until it completes or `deadline` passes (time_point::max(): no deadline);
// true when it completed.
bool sleep_until_finished(HandleState& s, std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  timespec ts{};
  const timespec* until = nullptr;
  if (deadline != Clock::time_point::max()) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
    ts.tv_sec = static_cast<time_t>(ns / 1000000000);
    ts.tv_nsec = static_cast<long>(ns % 1000000000);
    until = &ts;
  }
  for (;;) {
    if (s.finished.load(std::memory_order_acquire)) return true;
    uint32_t w = s.sleep_word.load(std::memory_order_acquire);
    // complete() sets `finished` before it swaps in kCompleted: a waiter that reads
    // kCompleted (acquire) sees `finished` on its next look.
    if (w == kNobodySleeps && !s.sleep_word.compare_exchange_strong(w, kSleepers)) continue;
    if (w == kCompleted) continue;
    if (until != nullptr && Clock::now() >= deadline) return s.finished.load(std::memory_order_acquire);
    futex_wait(&s.sleep_word, kSleepers, until);
  }
}

}  // namespace

std::shared_ptr<HandleState> make_handle_state(std::string name, OpKind kind) {
  return std::allocate_shared<HandleState>(BlockAllocator<HandleState>(), std::move(name), kind);
}

HandleState::~HandleState() {
  // An error nobody looked at must not vanish silently.
  if (finished.load(std::memory_order_acquire) && !observed.load(std::memory_order_relaxed) && !status.is_ok())
    std::fprintf(stderr, "kolo: collective \"%s\" failed and its handle was dropped unchecked: %s\n",
                 name.c_str(), status.message().c_str());
}

void HandleState::complete(Status s) {
  if (claimed.exchange(true, std::memory_order_acq_rel)) return;
  status = std::move(s);
  finished.store(true, std::memory_order_release);
  if (sleep_word.exchange(kCompleted, std::memory_order_acq_rel) == kSleepers) futex_wake_all(&sleep_word);
  if (!extra_ || !extra_->group) return;
  std::shared_ptr<HandleState> group = std::move(extra_->group);
  HandleExtra& g = *group->extra_;  // made by make_group_state
  bool last = false, wake = false;
  {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(g.group_mu);
    if (!status.is_ok() && g.group_status.is_ok()) g.group_status = status;
    if (extra_->member_index < g.outputs.size()) g.outputs[extra_->member_index] = std::move(extra_->gathered);
    last = --g.remaining == 0;
    if (!last && now - g.last_wake >= kGroupWakePeriod) wake = true, g.last_wake = now;
  }
  if (last) {
    group->complete(g.group_status);  // the last member: no other thread writes group_status now
  } else if (wake) {
    group->nudge();  // the waiters see it is not done and go back to sleep
  }
}

void HandleState::nudge() {
  if (sleep_word.load(std::memory_order_acquire) == kSleepers) futex_wake_all(&sleep_word);
}

std::shared_ptr<HandleState> make_group_state(const std::string& name, OpKind kind, size_t members,
                                              std::vector<std::shared_ptr<HandleState>>* member_states) {
  auto g = make_handle_state(name, kind);
  HandleExtra& ge = g->extra();
  ge.is_group = true;
  ge.remaining = members;
  ge.last_wake = std::chrono::steady_clock::now();
  if (kind != OpKind::kAllreduce) ge.outputs.resize(members);
  member_states->clear();
  for (size_t i = 0; i < members; ++i) {
    auto m = make_handle_state(name + "[" + std::to_string(i) + "]", kind);
    m->observed = true;  // internal: the group's state reports failures
    m->extra().group = g;
    m->extra().member_index = i;
    member_states->push_back(std::move(m));
  }
  if (members == 0) g->complete(Status::ok());
  return g;
}

void HandleState::wait() {
  help_wait(finished);
  if (finished.load(std::memory_order_acquire)) return;  // the usual end of a helped wait
  sleep_until_finished(*this, std::chrono::steady_clock::time_point::max());
}

bool HandleState::wait_for(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto now = Clock::now();
  // A timeout beyond any clock (Python's wait_for(1e12)) is no deadline at all.
  const auto deadline = timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now)
                            ? Clock::time_point::max()
                            : now + timeout;
  if (timeout.count() > 0) help_wait(finished, deadline);
  if (finished.load(std::memory_order_acquire)) return true;
  return sleep_until_finished(*this, deadline);
}

}  // namespace detail

namespace {
detail::HandleState& must(const std::shared_ptr<detail::HandleState>& s) {
  if (!s) throw Error(Status::invalid_argument("kolo::Handle: waiting on an empty handle"));
  return *s;
}
}  // namespace

bool Handle::done() const { return must(state_).finished.load(std::memory_order_acquire); }

const Status& Handle::status() const {
  auto& s = must(state_);
  s.wait();  // returns once `finished`: the status is written and read-only from then on
  s.observed.store(true, std::memory_order_relaxed);
  return s.status;
}

bool Handle::wait_for(std::chrono::milliseconds timeout) const {
  return must(state_).wait_for(timeout);
}

const Tensor& Handle::output() const& {
  const auto& s = must(state_);
  if (s.is_group() || (s.kind != OpKind::kAllgather && s.kind != OpKind::kAlltoall && s.kind != OpKind::kReducescatter))
    throw Error(Status::invalid_argument("kolo::Handle::output() on \"" + s.name + "\": only a single allgather, "
                                         "alltoall or reducescatter returns a tensor; this is " +
                                         (s.is_group() ? "a grouped " : "") + std::string(op_kind_name(s.kind))));
  throw_if_error(status());
  return state_->extra_->gathered;  // made with the state for these kinds
}

int Handle::last_joined_rank() const {
  const auto& s = must(state_);
  if (!s.extra_ || !s.extra_->is_join) {
    throw Error(Status::invalid_argument("kolo::Handle::last_joined_rank() on \"" + s.name +
                                         "\": only the handle of kolo::join_async() has one"));
  }
  throw_if_error(status());
  return state_->extra_->join_last_rank;
}

const std::vector<int64_t>& Handle::received_splits() const {
  const auto& s = must(state_);
  if (s.is_group() || s.kind != OpKind::kAlltoall)
    throw Error(Status::invalid_argument("kolo::Handle::received_splits() on \"" + s.name +
                                         "\": only an alltoall receives splits; this is " +
                                         (s.is_group() ? "a grouped " : "") + std::string(op_kind_name(s.kind))));
  throw_if_error(status());
  return state_->extra_->received_splits;
}

const std::vector<Tensor>& Handle::outputs() const& {
  const auto& s = must(state_);
  if (!s.is_group() || s.kind == OpKind::kAllreduce)
    throw Error(Status::invalid_argument("kolo::Handle::outputs() on \"" + s.name +
                                         "\": only a grouped allgather or reducescatter returns a list of tensors"));
  throw_if_error(status());
  return state_->extra_->outputs;
}

const Tensor& Handle::gathered() const {
  if (must(state_).kind != OpKind::kAllgather || state_->is_group())
    throw Error(Status::invalid_argument("kolo::Handle::gathered() on \"" + state_->name +
                                         "\": only allgather handles hold a gathered tensor; this one is " +
                                         std::string(op_kind_name(state_->kind))));
  throw_if_error(status());
  return state_->extra_->gathered;
}

// The state is never const (handles share it); the const& forms check, wait and throw.
Tensor Handle::output() && { return std::move(const_cast<Tensor&>(std::as_const(*this).output())); }

std::vector<Tensor> Handle::outputs() && {
  return std::move(const_cast<std::vector<Tensor>&>(std::as_const(*this).outputs()));
}

void synchronize(const Handle& h) { throw_if_error(h.status()); }

bool poll(const Handle& h) { return h.done(); }

}  // namespace kolo
