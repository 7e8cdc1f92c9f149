// POSIX shared-memory plumbing of ops/shm/shm_segment.h.
#include "ops/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace kolo::shm {
namespace {

std::string errno_text(const char* what, const std::string& name, int err) {
  return std::string("shared memory: ") + what + "(\"" + name + "\") failed: " + std::strerror(err);
}

// Maps `fd` read-write and pre-faults it: page faults inside a timed collective would cost
// more than the populate does here, once, at start-up.
Status map_fd(int fd, const std::string& name, size_t bytes, void** out) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) return Status::communication(errno_text("mmap", name, errno));
  *out = p;
  return Status::ok();
}

}  // namespace

SharedMapping::~SharedMapping() { reset(); }

SharedMapping::SharedMapping(SharedMapping&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

SharedMapping& SharedMapping::operator=(SharedMapping&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void SharedMapping::reset() {
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

Status SharedMapping::validate_name(const std::string& name) {
  if (name.size() < 2 || name.size() > 201 || name[0] != '/' ||
      name.find('/', 1) != std::string::npos) {
    return Status::invalid_argument("shared memory: segment name \"" + name +
                                    "\" must be \"/\" followed by 1..200 characters without \"/\"");
  }
  return Status::ok();
}

Status SharedMapping::create(const std::string& name, size_t bytes, SharedMapping* out) {
  KOLO_RETURN_IF_ERROR(validate_name(name));
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 && errno == EEXIST) {
    shm_unlink(name.c_str());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  if (fd < 0) return Status::communication(errno_text("shm_open", name, errno));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    return Status::communication(errno_text("ftruncate", name, err) + " (size " +
                                 std::to_string(bytes) + " bytes; is /dev/shm large enough?)");
  }
  // Reserve the pages now: on a full /dev/shm (Docker's default is 64 MB) ftruncate succeeds
  // and the first touch of a missing page would kill the process with SIGBUS.
  const int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
    close(fd);
    shm_unlink(name.c_str());
    return Status::communication(errno_text("posix_fallocate", name, rc) + " (" +
                                 std::to_string(bytes) +
                                 " bytes needed in /dev/shm; a container may need a larger --shm-size)");
  }
  void* p = nullptr;
  Status s = map_fd(fd, name, bytes, &p);
  close(fd);  // the mapping keeps the memory; the descriptor is not needed any more
  if (!s.is_ok()) {
    shm_unlink(name.c_str());
    return s;
  }
  out->reset();
  out->data_ = p;
  out->size_ = bytes;
  return Status::ok();
}

Status SharedMapping::open(const std::string& name, size_t bytes, SharedMapping* out) {
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
  void* p = nullptr;
  Status s = map_fd(fd, name, bytes, &p);
  close(fd);
  if (!s.is_ok()) return s;
  out->reset();
  out->data_ = p;
  out->size_ = bytes;
  return Status::ok();
}

Status SharedMapping::establish(const std::string& name, size_t bytes, bool creator,
                                const Agree& agree, const std::function<void(void*)>& init,
                                const std::function<Status(void*)>& on_mapped, SharedMapping* out) {
  Status s;
  if (creator) {
    s = create(name, bytes, out);
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
  if (!creator) s = open(name, bytes, out);
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
