// The session-8 audit of last session's protocol (docs/correctness.md): the fast path, process
// sets, grouped collectives and join driven together the way programs drive them, with exact
// results everywhere and every injected mismatch an error on every rank.
//
//   - random steps: tensors negotiated before (the board carries them on one host) mixed
//     with first-time names, broadcasts, allgathers (zero rows on some ranks), grouped
//     allreduces, collectives on two process sets, a second user thread with its own names,
//     join phases, and a shape/dtype/op changed on one rank mid-stream;
//   - a duplicate name from two threads at once while the first is in flight, on the fast
//     path, on a process set and as a group: one submission runs, the other is refused whole;
//   - handle and process-set misuse: waiting twice, an empty handle, a removed set.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

struct Spec {
  std::string name;
  DType dtype;
  ReduceOp op;
  size_t count;
};

// The same signature every step: negotiated once, then agreed on the shared-memory board.
// Zero, one and odd element counts, 16-bit floats, every reduce op, sizes over a chunk.
const std::vector<Spec>& repeated() {
  static const std::vector<Spec> v = {
      {"au.empty", DType::kFloat32, ReduceOp::kSum, 0},         {"au.one.f16", DType::kFloat16, ReduceOp::kSum, 1},
      {"au.odd.bf16", DType::kBFloat16, ReduceOp::kAverage, 17}, {"au.i32.max", DType::kInt32, ReduceOp::kMax, 1023},
      {"au.f64.min", DType::kFloat64, ReduceOp::kMin, 4099},    {"au.i64.prod", DType::kInt64, ReduceOp::kProduct, 5},
      {"au.f16.avg", DType::kFloat16, ReduceOp::kAverage, 70001}, {"au.big", DType::kFloat32, ReduceOp::kSum, 300001}};
  return v;
}

std::vector<int> all_ranks_but(int skip) {
  std::vector<int> out;
  for (int r = 0; r < size(); ++r)
    if (r != skip) out.push_back(r);
  return out;
}

bool is_member(const std::vector<int>& members) {
  return std::find(members.begin(), members.end(), rank()) != members.end();
}

// One allreduce this rank submits, what it must hold afterwards, or the error it must get.
struct Reduce {
  Spec spec;
  uint64_t seed;
  std::vector<int> contributors;  // whose inputs make the result
  ProcessSet set;
  bool must_fail = false;
  std::unique_ptr<Buffer> buf;
  Handle h;
};

void fill_and_submit(Reduce& r, DType dtype, ReduceOp op, size_t count) {
  r.buf = std::make_unique<Buffer>(dtype, count);
  // Values as the specification says (a single-member set has nobody to disagree with, so
  // a changed op or dtype there must still give the specified result).
  for (size_t i = 0; i < count; ++i) r.buf->put(i, input_value(r.seed, rank(), i, r.spec.dtype, r.spec.op));
  r.h = allreduce_async(r.buf->view(), r.spec.name, AllreduceOptions{op, 1.0, 1.0, r.set});
}

// `r` as specified, or (on the victim of an injected mismatch) with one thing changed.
void submit(Reduce& r, int change) {
  DType dtype = r.spec.dtype;
  ReduceOp op = r.spec.op;
  size_t count = r.spec.count;
  if (change == 0) count += 1;
  if (change == 1) dtype = dtype == DType::kFloat64 ? DType::kFloat32 : DType::kFloat64;
  if (change == 2) op = op == ReduceOp::kSum ? ReduceOp::kMax : ReduceOp::kSum;
  fill_and_submit(r, dtype, op, count);
}

// Waits for `r` and returns how many elements are wrong (0 for a failure that was expected).
size_t check(Reduce& r) {
  if (r.must_fail) {
    const std::string e = wait_error(r.h, 60);
    CHECK_THAT(e, Catch::Contains("\"" + r.spec.name + "\""));
    return 0;
  }
  wait_ok(r.h);
  size_t wrong = 0;
  for (size_t i = 0; i < r.spec.count; ++i) {
    const double want = expected_over(r.contributors, r.seed, i, r.spec.dtype, r.spec.op);
    if (std::abs(r.buf->at(i) - want) > tolerance(r.spec.dtype, want)) {
      if (wrong++ == 0) UNSCOPED_INFO(r.spec.name << "[" << i << "] = " << r.buf->at(i) << ", expected " << want);
    }
  }
  return wrong;
}

// The second user thread of each rank: its own names, every step, in its own order. Catch's
// assertions are not thread-safe, so it returns what went wrong (empty: nothing).
std::string second_thread(int step) {
  std::mt19937 rng(static_cast<unsigned>(step * 31 + rank()));
  std::vector<Reduce> rs(4);
  std::vector<size_t> order = {0, 1, 2, 3};
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t k : order) {
    rs[k].spec = {"au.thread." + std::to_string(k), k % 2 ? DType::kFloat32 : DType::kInt32, ReduceOp::kSum, 100 * k + 3};
    rs[k].seed = static_cast<uint64_t>(step * 100 + 50 + static_cast<int>(k));
    rs[k].contributors = all_ranks_but(-1);
    submit(rs[k], -1);
  }
  for (Reduce& r : rs) {
    if (!r.h.wait_for(std::chrono::seconds(60))) return r.spec.name + ": still waiting after 60 s";
    if (!r.h.status().is_ok()) return r.spec.name + ": " + r.h.status().message();
    for (size_t i = 0; i < r.spec.count; ++i)
      if (r.buf->at(i) != expected_over(r.contributors, r.seed, i, r.spec.dtype, r.spec.op))
        return r.spec.name + "[" + std::to_string(i) + "] = " + std::to_string(r.buf->at(i));
  }
  return "";
}

// Joins a thread however the scope is left (a failed REQUIRE throws).
struct Joined {
  std::thread t;
  ~Joined() {
    if (t.joinable()) t.join();
  }
};

// Whether this job agrees on repeated tensors through the board: one host, several ranks,
// KOLO_FAST_PATH not 0, no pretend hosts, the shared-memory executor on.
bool board_expected() {
  auto is = [](const char* name, const char* value) {
    const char* v = std::getenv(name);
    return v && std::string(v) == value;
  };
  const char* hosts = std::getenv("KOLO_TEST_RANKS_PER_HOST");
  return size() > 1 && local_size() == size() && !is("KOLO_FAST_PATH", "0") && !is("KOLO_CPU_OPERATIONS", "mpi") &&
         !(hosts && std::string(hosts) != "0");
}

}  // namespace

TEST_CASE("audit: random steps mixing the fast path, first-time names, sets, groups, join and mismatches",
          "[audit]") {
  const std::vector<int> a_ranks = all_ranks_but(0);               // a set without rank 0
  const std::vector<int> b_ranks = {0, size() - 1};                // rank 0 and the last
  const ProcessSet set_a = add_process_set(a_ranks);
  const ProcessSet set_b = add_process_set(size() > 1 ? b_ranks : std::vector<int>{0});
  const auto before = runtime_stats();
  // The same draws on every rank; AUDIT_SEED picks other sequences (for soak runs by hand).
  const char* seed_env = std::getenv("AUDIT_SEED");
  std::mt19937_64 shared(seed_env ? std::strtoull(seed_env, nullptr, 10) : 2026);
  int injected = 0;
  std::mt19937 mine(77u + static_cast<unsigned>(rank()));
  const int steps = 24;
  for (int step = 0; step < steps; ++step) {
    const bool join_step = step % 8 == 5;
    const int joiner = static_cast<int>(shared() % static_cast<uint64_t>(size()));
    // An injected mismatch on one rank, in some steps: which tensor, which rank, what.
    const bool inject = !join_step && step > 1 && shared() % 3 == 0;
    const size_t victim_tensor = shared() % (repeated().size() + 1);  // the last: set A's tensor
    const int victim = static_cast<int>(shared() % static_cast<uint64_t>(size()));
    const int change = static_cast<int>(shared() % 3);
    const int root = static_cast<int>(shared() % static_cast<uint64_t>(size()));
    std::vector<Spec> fresh;  // first-time names
    for (int j = 0; j < 2; ++j)
      fresh.push_back({"au.new." + std::to_string(step) + "." + std::to_string(j), all_dtypes()[shared() % all_dtypes().size()],
                       all_reduce_ops()[shared() % 5], static_cast<size_t>(shared() % 300)});
    INFO("step " << step << (join_step ? " (join, joiner " + std::to_string(joiner) + ")" : "")
                 << (inject ? " mismatch on tensor " + std::to_string(victim_tensor) + " rank " +
                                  std::to_string(victim) + " change " + std::to_string(change)
                            : ""));
    injected += inject;
    if (join_step && rank() == joiner) {
      const int last = join();
      CHECK(last != joiner);
      continue;
    }
    const std::vector<int> contributors = join_step ? all_ranks_but(joiner) : all_ranks_but(-1);

    std::vector<Reduce> rs;
    rs.reserve(repeated().size() + 4);
    for (size_t k = 0; k < repeated().size(); ++k) {
      Reduce r;
      r.spec = repeated()[k];
      r.seed = static_cast<uint64_t>(step * 1000) + k;
      r.contributors = contributors;
      r.must_fail = inject && victim_tensor == k;
      rs.push_back(std::move(r));
    }
    for (int j = 0; j < 2; ++j) {
      Reduce r;
      r.spec = fresh[static_cast<size_t>(j)];
      r.seed = static_cast<uint64_t>(step * 1000 + 100 + j);
      r.contributors = contributors;
      rs.push_back(std::move(r));
    }
    if (!join_step) {  // process sets (join covers the global set only)
      if (is_member(a_ranks)) {
        Reduce r;
        r.spec = {"au.set.a", DType::kInt32, ReduceOp::kSum, 33};
        r.seed = static_cast<uint64_t>(step * 1000 + 200);
        r.contributors = a_ranks;
        r.set = set_a;
        // A changed signature fails on every member when the victim is one of several members.
        r.must_fail = inject && victim_tensor == repeated().size() && a_ranks.size() > 1 &&
                      std::find(a_ranks.begin(), a_ranks.end(), victim) != a_ranks.end();
        rs.push_back(std::move(r));
      }
      if (set_b.included()) {
        Reduce r;
        r.spec = {"au.set.b", DType::kFloat64, ReduceOp::kAverage, 5};
        r.seed = static_cast<uint64_t>(step * 1000 + 300);
        r.contributors = set_b.ranks();
        r.set = set_b;
        rs.push_back(std::move(r));
      }
    }
    std::string other_error;
    Joined other;
    if (!join_step) other.t = std::thread([&] { other_error = second_thread(step); });

    // Broadcast (root never the joiner), allgather with zero rows on some ranks, a group.
    const int bc_root = join_step && root == joiner ? (root + 1) % size() : root;
    Buffer bc(DType::kFloat32, step % 3 == 0 ? 0 : 999);
    for (size_t i = 0; i < bc.count(); ++i)
      bc.put(i, rank() == bc_root ? input_value(step, bc_root, i, DType::kFloat32, ReduceOp::kSum) : -99);
    auto rows_of = [&](int r) { return static_cast<int64_t>((r + step) % 3); };
    Buffer ag(DType::kBFloat16, static_cast<size_t>(rows_of(rank()) * 5));
    for (size_t i = 0; i < ag.count(); ++i) ag.put(i, input_value(step, rank(), i, DType::kBFloat16, ReduceOp::kMax));
    std::vector<Buffer> grp;
    for (size_t n : {size_t{0}, size_t{7}, size_t{1000}}) grp.emplace_back(DType::kFloat32, n);
    for (size_t m = 0; m < grp.size(); ++m)
      for (size_t i = 0; i < grp[m].count(); ++i) grp[m].put(i, input_value(step * 10 + m, rank(), i, DType::kFloat32, ReduceOp::kSum));

    // Everything in this rank's own order, with an occasional pause.
    const size_t extra = 3;  // broadcast, allgather, group
    std::vector<size_t> order(rs.size() + extra);
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::shuffle(order.begin(), order.end(), mine);
    Handle hb, hg, hgrp;
    for (size_t k : order) {
      if (mine() % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(mine() % 1500));
      if (k < rs.size()) {
        const bool victim_here = inject && rank() == victim &&
                                 ((victim_tensor < repeated().size() && rs[k].spec.name == repeated()[victim_tensor].name) ||
                                  (victim_tensor == repeated().size() && rs[k].spec.name == "au.set.a"));
        submit(rs[k], victim_here ? change : -1);
      } else if (k == rs.size()) {
        hb = broadcast_async(bc.view(), bc_root, "au.bcast");
      } else if (k == rs.size() + 1) {
        hg = allgather_async(ag.view({rows_of(rank()), 5}), "au.gather");
      } else {
        hgrp = grouped_allreduce_async({grp[0].view(), grp[1].view(), grp[2].view()}, "au.group", {ReduceOp::kSum});
      }
    }

    size_t wrong = 0;
    for (Reduce& r : rs) wrong += check(r);
    wait_ok(hb);
    for (size_t i = 0; i < bc.count(); ++i)
      wrong += bc.at(i) != input_value(step, bc_root, i, DType::kFloat32, ReduceOp::kSum);
    wait_ok(hg);
    const Tensor& gathered = hg.gathered();
    int64_t rows = 0;
    for (int r : contributors) rows += rows_of(r);
    CHECK(gathered.shape == Shape{rows, 5});
    size_t at = 0;
    for (int r : contributors)
      for (size_t i = 0; i < static_cast<size_t>(rows_of(r) * 5); ++i, ++at)
        wrong += get(gathered.bytes.data(), DType::kBFloat16, at) != input_value(step, r, i, DType::kBFloat16, ReduceOp::kMax);
    wait_ok(hgrp);
    for (size_t m = 0; m < grp.size(); ++m)
      for (size_t i = 0; i < grp[m].count(); ++i)
        wrong += grp[m].at(i) != expected_over(contributors, step * 10 + m, i, DType::kFloat32, ReduceOp::kSum);
    CHECK(wrong == 0);
    if (other.t.joinable()) other.t.join();
    CHECK(other_error == "");
    if (join_step) CHECK(join() != joiner);
  }
  barrier("au.steps.done");
  CHECK(injected >= 2);
  const auto after = runtime_stats();
  // The board carried the repeated tensors (all of them each step with the default cache; a
  // tiny KOLO_CACHE_CAPACITY leaves it only the few names still cached).
  const uint64_t fast = after.fast_collectives - before.fast_collectives;
  if (board_expected()) CHECK(fast >= (std::getenv("KOLO_CACHE_CAPACITY") ? 1u : static_cast<uint64_t>(steps)));
  if (!board_expected()) CHECK(fast == 0);
  remove_process_set(set_b);
  remove_process_set(set_a);
}

namespace {

// Rank r's element i of the duplicate rounds: positive, so a sum never equals one input.
float dup_value(int round, int r, size_t i) { return static_cast<float>(1 + (round + r * 3 + static_cast<int>(i)) % 5); }

// Submits `views` under `name` on `set`: a group of them when `grouped`, else views[0].
Handle submit_dup(const std::vector<TensorView>& views, const std::string& name, const ProcessSet& set, bool grouped) {
  if (grouped) return grouped_allreduce_async(views, name, {ReduceOp::kSum, 1.0, 1.0, set});
  return allreduce_async(views[0], name, {ReduceOp::kSum, 1.0, 1.0, set});
}

}  // namespace

TEST_CASE("audit: one name from two threads while in flight: one runs, one is refused whole, on every path",
          "[audit]") {
  // path 0: the global set, name cached (the board on one host); 1: a process set of every
  // rank but one (when there are 3+ ranks); 2: a grouped allreduce of two members.
  const ProcessSet all_but_last = size() > 2 ? add_process_set(all_ranks_but(size() - 1)) : ProcessSet{};
  for (int path = 0; path < 3; ++path) {
    const ProcessSet set = path == 1 ? all_but_last : ProcessSet{};
    const bool member = path != 1 || set.included();
    const int members = path == 1 ? set.size() : size();
    const bool grouped = path == 2;
    const size_t n = 9;
    const std::string name = "au.dup." + std::to_string(path);
    for (int holder = 0; holder < members; ++holder) {
      const int holder_rank = path == 1 ? set.ranks()[static_cast<size_t>(holder)] : holder;
      const int round = path * 100 + holder;
      INFO("path " << path << " holder rank " << holder_rank);
      // Everyone runs the name a few times first: afterwards it is cached (and on the board).
      for (int warm = 0; warm < 3 && member; ++warm) {
        std::vector<float> a(n, 1.0f), b(n, 2.0f);
        std::vector<TensorView> vs{TensorView::of(a), TensorView::of(b)};
        wait_ok(submit_dup(vs, name, set, grouped));
        CHECK(a[0] == static_cast<float>(members));
      }
      // The holder's two threads submit at the same moment; its peers wait behind a gate.
      std::vector<std::vector<float>> bufs(4, std::vector<float>(n));
      for (auto& b : bufs)
        for (size_t i = 0; i < n; ++i) b[i] = dup_value(round, rank(), i);
      Handle hs[2];
      if (rank() == holder_rank) {
        std::atomic<int> ready{0};
        auto go = [&](int t) {
          ready.fetch_add(1);
          while (ready.load() < 2) {
          }
          std::vector<TensorView> vs{TensorView::of(bufs[2 * t]), TensorView::of(bufs[2 * t + 1])};
          hs[t] = submit_dup(vs, name, set, grouped);
        };
        std::thread t0(go, 0), t1(go, 1);
        t0.join();
        t1.join();
        // Exactly one refused at once, whole (for a group: both members' buffers untouched).
        const int refused = hs[0].done() ? 0 : 1;
        const int accepted = 1 - refused;
        REQUIRE(hs[refused].done());
        REQUIRE_FALSE(hs[accepted].done());
        CHECK_THAT(hs[refused].status().message(), Catch::Contains("submitted again on rank " + std::to_string(rank())));
        for (int m = 0; m < 2; ++m)
          for (size_t i = 0; i < n; ++i) CHECK(bufs[static_cast<size_t>(2 * refused + m)][i] == dup_value(round, rank(), i));
        barrier("au.dup.gate." + std::to_string(round));
        wait_ok(hs[accepted]);
        for (int m = 0; m < (grouped ? 2 : 1); ++m)
          for (size_t i = 0; i < n; ++i) {
            float want = 0;
            for (int r = 0; r < members; ++r) want += dup_value(round, path == 1 ? set.ranks()[static_cast<size_t>(r)] : r, i);
            CHECK(bufs[static_cast<size_t>(2 * accepted + m)][i] == want);
          }
      } else {
        barrier("au.dup.gate." + std::to_string(round));
        if (member) {
          std::vector<TensorView> vs{TensorView::of(bufs[0]), TensorView::of(bufs[1])};
          wait_ok(submit_dup(vs, name, set, grouped));
        }
      }
    }
  }
  barrier("au.dup.done");
  if (size() > 2) remove_process_set(all_but_last);
}

TEST_CASE("audit: a name moves between the global set (board) and process sets, and survives a set's removal",
          "[audit]") {
  // The same name, completed each time before it moves: global (cached, so on the board
  // after the first), then a set, back to global, then a set that is removed and re-added
  // (a new id), and global again. Every use exact; a use of the removed id refused.
  const std::vector<int> members = size() > 2 ? all_ranks_but(0) : std::vector<int>{0, size() - 1};
  ProcessSet set = add_process_set(members);
  auto run = [&](const ProcessSet& on, int round) {
    const std::vector<int> who = on.id() == 0 ? all_ranks_but(-1) : on.ranks();
    if (!is_member(who)) return;
    Buffer b(DType::kFloat32, 12);
    for (size_t i = 0; i < b.count(); ++i) b.put(i, input_value(round, rank(), i, DType::kFloat32, ReduceOp::kSum));
    wait_ok(allreduce_async(b.view(), "au.moving", {ReduceOp::kSum, 1.0, 1.0, on}));
    size_t wrong = 0;
    for (size_t i = 0; i < b.count(); ++i) wrong += b.at(i) != expected_over(who, round, i, DType::kFloat32, ReduceOp::kSum);
    INFO("round " << round << " on set " << on.id());
    CHECK(wrong == 0);
  };
  int round = 0;
  for (int i = 0; i < 3; ++i) run(ProcessSet{}, round++);
  for (int i = 0; i < 2; ++i) run(set, round++);
  for (int i = 0; i < 3; ++i) run(ProcessSet{}, round++);
  barrier("au.moving.before-remove");
  const ProcessSet removed = set;
  remove_process_set(set);
  if (is_member(members)) {
    std::vector<float> v(12, 1.0f);
    CHECK_THAT(wait_error(allreduce_async(TensorView::of(v), "au.moving", {ReduceOp::kSum, 1.0, 1.0, removed}), 5),
               Catch::Contains("is not registered"));
  }
  set = add_process_set(members);
  CHECK(set.id() != removed.id());
  for (int i = 0; i < 2; ++i) run(set, round++);
  for (int i = 0; i < 3; ++i) run(ProcessSet{}, round++);
  barrier("au.moving.done");
  remove_process_set(set);
}
