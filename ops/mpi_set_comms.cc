// ops/mpi_set_comms.cc — a process set's communicators, made on a helper thread while the
// coordinator watches for dead members (ops/mpi_set_comms.h).
#include "ops/mpi_set_comms.h"

#include <chrono>
#include <string>
#include <thread>

#include "core/liveness.h"
#include "ops/mpi_util.h"

namespace kolo::ops {
namespace {

// The blocking part: every call below is collective over the set's members.
Status build_comms(const SetCommsPlan& plan, SetComms* c) {
  MPI_Group all = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  MPI_Comm_group(plan.parent, &all);
  MPI_Group_incl(all, static_cast<int>(plan.members.size()), plan.members.data(), &group);
  // The tag keeps creations of different sets apart; ids are unique per job.
  const int rc = MPI_Comm_create_group(plan.parent, group, static_cast<int>(plan.id), &c->comm);
  MPI_Group_free(&group);
  MPI_Group_free(&all);
  KOLO_RETURN_IF_ERROR(mpi_status(rc, "MPI_Comm_create_group"));
  MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
  Topology& t = c->topo;
  MPI_Comm_rank(c->comm, &t.rank);
  MPI_Comm_size(c->comm, &t.size);
  // The set's ranks on this host, and one communicator per local rank across hosts.
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Comm_split(c->comm, plan.host_id, t.rank, &c->local), "MPI_Comm_split"));
  MPI_Comm_rank(c->local, &t.local_rank);
  MPI_Comm_size(c->local, &t.local_size);
  KOLO_RETURN_IF_ERROR(mpi_status(MPI_Comm_split(c->comm, t.local_rank, t.rank, &c->cross), "MPI_Comm_split"));
  MPI_Comm_rank(c->cross, &t.cross_rank);
  MPI_Comm_size(c->cross, &t.cross_size);
  return Status::ok();
}

void build(const SetCommsPlan& plan, SetComms* c) {
  c->status = build_comms(plan, c);
  // Collective over the set: every member gets the executor or none does.
  if (c->status.is_ok() && plan.shm && c->topo.size > 1)
    c->shm_status = shm::ShmExecutor::create(c->topo, c->comm, c->local, c->cross, plan.shm_options, &c->shm);
  c->done.store(true, std::memory_order_release);
}

int thread_level() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided;
}

}  // namespace

Status make_set_comms(const SetCommsPlan& plan, const std::shared_ptr<SetComms>& out, Liveness* liveness,
                      const std::function<Status()>& while_waiting) {
  if (liveness == nullptr || thread_level() < MPI_THREAD_MULTIPLE) {
    build(plan, out.get());
    return Status::ok();
  }
  // The helper owns copies of the plan and a share of `out`: it may outlive this call.
  std::thread helper([plan, out] { build(plan, out.get()); });
  const std::string during =
      "process set " + std::to_string(plan.id) + ": creating its communicators with its members";
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    if (out->done.load(std::memory_order_acquire)) {
      helper.join();
      return Status::ok();
    }
    Status s = liveness->check(during.c_str());
    if (s.is_ok() && while_waiting) s = while_waiting();
    if (!s.is_ok()) {
      // The runtime stops with this error; the helper may stay blocked in MPI for good.
      helper.detach();
      return s;
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited < std::chrono::microseconds(500)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace kolo::ops
