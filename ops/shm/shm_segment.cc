// POSIX shared-memory plumbing of ops/shm/shm_segment.h.
#include "ops/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

namespace kolo::shm {
namespace {

std::string errno_text(const char* what, const std::string& name, int err) {
  return std::string("shared memory: ") + what + "(\"" + name + "\") failed: " + std::strerror(err);
}

constexpr size_t kPage = 4096;
std::atomic<int> g_commit_fault{0};  // fail_commits_for_test

// Maps `fd` read-write. Eager segments are pre-faulted: page faults inside a timed collective
// would cost more than the populate does here, once, at start-up. A lazy segment must not be
// populated (that would commit every page, and a missing one is a SIGBUS on a full /dev/shm):
// commit() pre-faults each range it reserves.
Status map_fd(int fd, const std::string& name, size_t bytes, Commit commit, void** out) {
  const int flags = MAP_SHARED | (commit == Commit::kEager ? MAP_POPULATE : 0);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, fd, 0);
  if (p == MAP_FAILED) return Status::communication(errno_text("mmap", name, errno));
  *out = p;
  return Status::ok();
}

}  // namespace

SharedMapping::~SharedMapping() { reset(); }

SharedMapping::SharedMapping(SharedMapping&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      fd_(std::exchange(o.fd_, -1)),
      name_(std::move(o.name_)) {}

SharedMapping& SharedMapping::operator=(SharedMapping&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    fd_ = std::exchange(o.fd_, -1);
    name_ = std::move(o.name_);
  }
  return *this;
}

void SharedMapping::reset() {
  if (data_ != nullptr) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
  name_.clear();
}

// Takes `fd`: maps it and either closes it (eager: the mapping keeps the memory) or keeps it
// for commit() (lazy).
Status SharedMapping::adopt(int fd, const std::string& name, size_t bytes, Commit commit) {
  void* p = nullptr;
  Status s = map_fd(fd, name, bytes, commit, &p);
  if (!s.is_ok() || commit == Commit::kEager) close(fd);
  if (!s.is_ok()) return s;
  reset();
  data_ = p;
  size_ = bytes;
  fd_ = commit == Commit::kLazy ? fd : -1;
  name_ = name;
  return Status::ok();
}

Status SharedMapping::validate_name(const std::string& name) {
  if (name.size() < 2 || name.size() > 201 || name[0] != '/' ||
      name.find('/', 1) != std::string::npos) {
    return Status::invalid_argument("shared memory: segment name \"" + name +
                                    "\" must be \"/\" followed by 1..200 characters without \"/\"");
  }
  return Status::ok();
}

Status SharedMapping::create(const std::string& name, size_t bytes, SharedMapping* out, Commit commit) {
  KOLO_RETURN_IF_ERROR(validate_name(name));
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 && errno == EEXIST) {
    shm_unlink(name.c_str());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  if (fd < 0) return Status::communication(errno_text("shm_open", name, errno));
  const auto fail = [&](Status s) {
    close(fd);
    shm_unlink(name.c_str());
    return s;
  };
  // Sizing alone reserves nothing on tmpfs: the segment is sparse.
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    return fail(Status::communication(errno_text("ftruncate", name, err) + " (size " + std::to_string(bytes) +
                                      " bytes; is /dev/shm large enough?)"));
  }
  // Reserve the pages now (lazy: the header page only): on a full /dev/shm (Docker's
  // default is 64 MB) ftruncate succeeds and the first touch of a missing page would kill
  // the process with SIGBUS.
  const size_t now = commit == Commit::kEager ? bytes : std::min(bytes, kPage);
  const int rc = posix_fallocate(fd, 0, static_cast<off_t>(now));
  if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
    return fail(Status::communication(errno_text("posix_fallocate", name, rc) + " (" + std::to_string(now) +
                                      " bytes needed in /dev/shm; a container may need a larger --shm-size)"));
  }
  Status s = out->adopt(fd, name, bytes, commit);
  if (!s.is_ok()) shm_unlink(name.c_str());
  return s;
}

Status SharedMapping::open(const std::string& name, size_t bytes, SharedMapping* out, Commit commit) {
  KOLO_RETURN_IF_ERROR(validate_name(name));
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return Status::communication(errno_text("shm_open", name, errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    return Status::communication("shared memory: segment \"" + name + "\" has " +
                                 std::to_string(st.st_size) + " bytes, expected " +
                                 std::to_string(bytes) + " (ranks disagree on the options?)");
  }
  return out->adopt(fd, name, bytes, commit);
}

// posix_fallocate rather than madvise(MADV_POPULATE_WRITE) to reserve: it reports the cause
// (ENOSPC) where populate can only say EFAULT ("would have been a SIGBUS"); on tmpfs it is
// all or nothing (shmem_fallocate gives back what it added when it fails), and a request
// larger than the whole filesystem fails up front without touching memory. The populate
// after it only pre-faults pages that now exist (best effort; a fault later is no error).
Status SharedMapping::commit(size_t offset, size_t bytes) {
  if (fd_ < 0) return Status::internal("shared memory: commit() on a segment that is not lazy");
  if (offset > size_ || bytes > size_ - offset) return Status::internal("shared memory: commit() beyond the segment");
  const size_t lo = offset / kPage * kPage;
  const size_t hi = std::min(size_, (offset + bytes + kPage - 1) / kPage * kPage);
  if (hi <= lo) return Status::ok();
  const int fault = g_commit_fault.load(std::memory_order_relaxed);
  int rc = fault != 0 ? fault : posix_fallocate(fd_, static_cast<off_t>(lo), static_cast<off_t>(hi - lo));
  const char* what = fault != 0 ? "posix_fallocate (test fault)" : "posix_fallocate";
#ifdef MADV_POPULATE_WRITE
  char* p = static_cast<char*>(data_) + lo;
  if (rc == EOPNOTSUPP || rc == EINVAL) {  // no fallocate here: populate reports failure too
    what = "madvise(MADV_POPULATE_WRITE)";
    rc = madvise(p, hi - lo, MADV_POPULATE_WRITE) == 0 ? 0 : errno;
  } else if (rc == 0 && fault == 0) {
    madvise(p, hi - lo, MADV_POPULATE_WRITE);
  }
#endif
  if (rc == 0) return Status::ok();
  struct statvfs fs {};
  std::string free_text;
  if (statvfs("/dev/shm", &fs) == 0) {
    free_text = "; /dev/shm has " + std::to_string(static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize) +
                " of " + std::to_string(static_cast<unsigned long long>(fs.f_blocks) * fs.f_frsize) + " bytes free";
  }
  return Status::communication("shared memory: could not commit " + std::to_string(hi - lo) +
                               " bytes in /dev/shm for \"" + name_ + "\": " + what + " failed: " +
                               std::strerror(rc) + free_text + " (a container may need a larger --shm-size)");
}

void SharedMapping::fail_commits_for_test(int err) { g_commit_fault.store(err, std::memory_order_relaxed); }

Status SharedMapping::decommit(size_t offset, size_t bytes) {
  if (fd_ < 0) return Status::internal("shared memory: decommit() on a segment that is not lazy");
  const size_t lo = (offset + kPage - 1) / kPage * kPage;
  const size_t hi = std::min(size_, (offset + bytes) / kPage * kPage);
  if (hi <= lo) return Status::ok();
  if (fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(lo),
                static_cast<off_t>(hi - lo)) != 0) {
    return Status::communication(errno_text("fallocate(PUNCH_HOLE)", name_, errno));
  }
  return Status::ok();
}

Status SharedMapping::establish(const std::string& name, size_t bytes, bool creator,
                                const Agree& agree, const std::function<void(void*)>& init,
                                const std::function<Status(void*)>& on_mapped, SharedMapping* out,
                                Commit commit) {
  Status s;
  if (creator) {
    s = create(name, bytes, out, commit);
    if (s.is_ok()) init(out->data());  // the agreement below orders these writes before any reader
  }
  bool all_ok = false;
  Status a = agree(s.is_ok(), &all_ok);
  if (!a.is_ok() || !all_ok) {
    if (creator) unlink(name);
    if (!a.is_ok()) return a;
    return s.is_ok() ? Status::communication("shared memory: the creator of \"" + name +
                                             "\" failed (see its error)")
                     : s;
  }
  if (!creator) s = open(name, bytes, out, commit);
  if (s.is_ok()) s = on_mapped(out->data());
  a = agree(s.is_ok(), &all_ok);
  unlink(name);  // every rank tries: whoever survives cleans up
  if (!a.is_ok()) return a;
  if (!s.is_ok()) return s;
  if (!all_ok) {
    return Status::communication("shared memory: another local rank could not map \"" + name +
                                 "\" (see its error)");
  }
  return Status::ok();
}

Status SharedMapping::unlink(const std::string& name) {
  if (shm_unlink(name.c_str()) != 0 && errno != ENOENT) {
    return Status::communication(errno_text("shm_unlink", name, errno));
  }
  return Status::ok();
}

}  // namespace kolo::shm
