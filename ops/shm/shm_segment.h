// ops/shm/shm_segment.h — a POSIX shared-memory segment mapped into this process.
//
// Purpose: the one place that talks to shm_open/ftruncate/mmap/shm_unlink, so the rest of
// the shared-memory engine works on plain memory. A segment is created by one process
// (O_CREAT|O_EXCL), opened by its peers, and unlinked by name as soon as every peer has
// mapped it: the mapping stays valid after unlink, and nothing is left in /dev/shm if a
// process dies later.
//
// Commit: by default (Commit::kEager) every page is reserved in /dev/shm at creation
// (posix_fallocate) and pre-faulted, so a full /dev/shm is an error at set-up, never a SIGBUS
// later. Commit::kLazy (ShmArena) only sizes the segment (sparse: costs nothing) and commits
// its first page (the header); the owner of a range calls commit() before touching it.
//
// Ownership: a SharedMapping owns its mapping (munmap in the destructor) and, when lazy, a
// descriptor of the segment (closed with it); it never owns the name — unlink() is an
// explicit step of the creation protocol (see shm_group.cc).
// Thread safety: none needed; created and destroyed by the coordinator thread.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "kolo/status.h"

namespace kolo::shm {

// An out-of-band agreement among the local ranks: every rank passes `ok_here`, and all learn
// whether every rank passed true (an MPI_Allreduce with MPI_MIN on the host's communicator;
// a pipe to a parent in tests).
using Agree = std::function<Status(bool ok_here, bool* ok_everywhere)>;

enum class Commit { kEager, kLazy };

class SharedMapping {
 public:
  SharedMapping() = default;
  ~SharedMapping();
  SharedMapping(SharedMapping&& o) noexcept;
  SharedMapping& operator=(SharedMapping&& o) noexcept;
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;

  // Creates `name` with `bytes` zero bytes and maps it. A stale segment of the same name (a
  // crashed earlier job that used the same name) is removed first: names are per job.
  static Status create(const std::string& name, size_t bytes, SharedMapping* out,
                       Commit commit = Commit::kEager);
  // Maps an existing segment `name`, which must be exactly `bytes` long.
  static Status open(const std::string& name, size_t bytes, SharedMapping* out,
                     Commit commit = Commit::kEager);
  // Removes the name (not the memory). Missing names are not an error.
  static Status unlink(const std::string& name);

  // The creation protocol, collective over the local ranks: the creator creates the segment
  // and runs `init` on it; all agree; the others map it; every rank runs `on_mapped` (check
  // the header, publish its pid); all agree; every rank removes the name — whatever
  // happened, so a failure on any rank leaves nothing in /dev/shm, and the name is gone
  // before any collective runs. Fails on every rank if it fails on one.
  static Status establish(const std::string& name, size_t bytes, bool creator, const Agree& agree,
                          const std::function<void(void* base)>& init,
                          const std::function<Status(void* base)>& on_mapped, SharedMapping* out,
                          Commit commit = Commit::kEager);

  // Lazy mappings only: reserves [offset, offset + bytes) of the segment in /dev/shm
  // (posix_fallocate; rounded out to whole pages) and pre-faults it. On failure nothing is
  // reserved and the error names /dev/shm, the bytes and the errno text; the range must
  // then not be touched. Committing a range twice is harmless.
  Status commit(size_t offset, size_t bytes);
  // Lazy mappings only: gives the pages wholly inside [offset, offset + bytes) back to
  // /dev/shm (they read as zero again). Nobody may touch them until they are re-committed.
  Status decommit(size_t offset, size_t bytes);
  // Test hook, process-wide: while `err` is non-zero every commit() fails as if the kernel
  // had returned it (the real failure is tested with a range larger than /dev/shm; this one
  // fails a single rank, which a shared /dev/shm cannot). 0 restores normal commits.
  static void fail_commits_for_test(int err);
  // Checks the form POSIX requires of a portable name: "/" then 1..200 characters, no "/".
  static Status validate_name(const std::string& name);

  void* data() const { return data_; }
  size_t size() const { return size_; }
  bool mapped() const { return data_ != nullptr; }

 private:
  void reset();
  Status adopt(int fd, const std::string& name, size_t bytes, Commit commit);
  void* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;        // lazy mappings keep the segment open for commit()
  std::string name_;   // for messages
};

}  // namespace kolo::shm
