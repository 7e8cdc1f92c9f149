// Status: an error keeps its message as it travels up through KOLO_RETURN_IF_ERROR, and
// gathers each file:line it passed (where()), innermost first, as NCCL's check macros do.
#include <catch2/catch.hpp>

#include <string>

#include "kolo/status.h"

namespace kolo {
namespace {

Status fails() { return Status::mismatch("allreduce \"x\": shapes differ"); }
Status inner() {
  KOLO_RETURN_IF_ERROR(fails());
  return Status::ok();
}
Status outer() {
  KOLO_RETURN_IF_ERROR(inner());
  return Status::internal("not reached");
}
Status passes() {
  KOLO_RETURN_IF_ERROR(Status::ok());
  return Status::ok();
}

}  // namespace

TEST_CASE("status: an error gathers file:line frames as it travels up, its message unchanged", "[status]") {
  const Status s = outer();
  CHECK(s.code() == Status::Code::kMismatch);
  CHECK(s.message() == "allreduce \"x\": shapes differ");
  CHECK(s.to_string() == "mismatch across ranks: allreduce \"x\": shapes differ");
  const std::string w = s.where();
  INFO(w);
  const size_t first = w.find("status_test.cc:");
  REQUIRE(first == 0);
  const size_t second = w.find(" < status_test.cc:", first);
  REQUIRE(second != std::string::npos);
  CHECK(std::stoi(w.substr(15)) < std::stoi(w.substr(second + 18)));  // inner()'s line, then outer()'s
  CHECK(w.find('/') == std::string::npos);                             // file names, not paths
}

TEST_CASE("status: copies keep the frames; ok and fresh errors have none", "[status]") {
  CHECK(passes().is_ok());
  CHECK(passes().where().empty());
  CHECK(fails().where().empty());
  Status a = outer();
  Status b = a;  // a copy
  Status c;
  c = a;
  CHECK(b.where() == a.where());
  CHECK(c.where() == a.where());
  CHECK(c.message() == a.message());
  Status d = std::move(b);
  CHECK(d.where() == a.where());
}

}  // namespace kolo
