// kolo/status.h — how kolo reports failure.
//
// Internally every fallible call returns a `Status`. At the public boundary a failed Status
// becomes a thrown `kolo::Error`, whose message names the tensor, the ranks and the cause
// (for example: allreduce "fc1.w": shape [120,400] on ranks 0,2 but [120,401] on rank 1).
//
// Thread safety: values; a Status may be copied between threads freely.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace kolo {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,    // the caller passed something wrong (bad shape, bad name, bad env)
    kMismatch,           // ranks disagree about a collective (shape, dtype, op, root, ...)
    kAborted,            // kolo shut down, or a peer stopped, while the work was pending
    kTimeout,            // a bounded wait on a peer ran out
    kCommunication,      // the transport (MPI, shared memory) reported a failure
    kInternal,           // a broken invariant inside kolo: a bug
  };

  Status() = default;
  Status(const Status& o) : code_(o.code_), rep_(o.rep_ ? std::make_unique<Rep>(*o.rep_) : nullptr) {}
  Status(Status&&) noexcept = default;
  Status& operator=(const Status& o) {
    if (this != &o) *this = Status(o);
    return *this;
  }
  Status& operator=(Status&&) noexcept = default;
  static Status ok() { return Status(); }
  static Status invalid_argument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status mismatch(std::string m) { return {Code::kMismatch, std::move(m)}; }
  static Status aborted(std::string m) { return {Code::kAborted, std::move(m)}; }
  static Status timeout(std::string m) { return {Code::kTimeout, std::move(m)}; }
  static Status communication(std::string m) { return {Code::kCommunication, std::move(m)}; }
  static Status internal(std::string m) { return {Code::kInternal, std::move(m)}; }

  bool is_ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return rep_ ? rep_->message : empty(); }
  // "ok", or "<code name>: <message>".
  std::string to_string() const;

  // The way the error travelled up, as NCCL's check macros keep it: each KOLO_RETURN_IF_ERROR
  // it passed adds "file:line", innermost first ("negotiation.cc:120 < coordinator.cc:310").
  // Empty when it passed none. Kept apart from message(), which says what the user reads;
  // kolo's error log lines print both ("... [at ...]").
  const std::string& where() const { return rep_ ? rep_->where : empty(); }
  // Adds one frame (KOLO_RETURN_IF_ERROR; `file`: the source's path, shortened to its name).
  Status at(const char* file, int line) &&;

 private:
  // An error's text lives on the heap, so that a Status is 16 bytes and an ok one allocates
  // nothing (a handle's state, two cache lines, holds one: core/handle_state.h).
  struct Rep {
    std::string message;
    std::string where;
  };
  Status(Code c, std::string m) : code_(c), rep_(std::make_unique<Rep>(Rep{std::move(m), {}})) {}
  static const std::string& empty();
  Code code_ = Code::kOk;
  std::unique_ptr<Rep> rep_;  // null for ok
};

const char* status_code_name(Status::Code c);

// The exception every public kolo call throws on failure. what() is the Status message.
class Error : public std::runtime_error {
 public:
  explicit Error(Status s) : std::runtime_error(s.message()), status_(std::move(s)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// Throws kolo::Error when `s` is not ok.
inline void throw_if_error(const Status& s) {
  if (!s.is_ok()) throw Error(s);
}

}  // namespace kolo

// Returns early from the enclosing function with the Status of `expr` when it failed, adding
// this file:line to its where().
#define KOLO_RETURN_IF_ERROR(expr)                                            \
  do {                                                                        \
    ::kolo::Status _kolo_s = (expr);                                          \
    if (!_kolo_s.is_ok()) return std::move(_kolo_s).at(__FILE__, __LINE__); \
  } while (0)
