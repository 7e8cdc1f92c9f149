// Writes the seed corpus for kolo-fuzz-codec: a few valid request and response lists.
//   make-corpus DIR
#include <cstdio>
#include <string>

#include "core/message.h"

namespace {
void write(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  kolo::RequestList rl;
  write(dir + "/requests-empty", kolo::encode(rl));
  kolo::Request q;
  q.name = "layer1.weight";
  q.shape = {64, 3, 3, 3};
  rl.requests = {q};
  q.kind = kolo::OpKind::kAllgather;
  q.name = "rows";
  q.shape = {5, 2};
  rl.requests.push_back(q);
  write(dir + "/requests-two", kolo::encode(rl));
  q.kind = kolo::OpKind::kAlltoall;
  q.name = "tokens";
  q.splits = {2, 0, 3};
  rl.requests.push_back(q);
  q.kind = kolo::OpKind::kReducescatter;
  q.name = "grads[1]";
  q.splits.clear();
  q.group = "grads";
  q.group_size = 2;
  rl.requests.push_back(q);
  write(dir + "/requests-new-kinds", kolo::encode(rl));
  rl.requests.resize(2);
  rl.shutdown = true;
  rl.shutdown_reason = "rank 1 received signal 15 (Terminated)";
  write(dir + "/requests-shutdown", kolo::encode(rl));
  rl.shutdown = false;
  rl.shutdown_reason.clear();
  rl.join = true;
  write(dir + "/requests-join", kolo::encode(rl));
  rl.join = false;
  rl.requests[1].process_set = 2;
  write(dir + "/requests-process-set", kolo::encode(rl));
  kolo::ResponseList sl;
  kolo::Response r;
  r.names = {"a", "b", "c"};
  r.sizes = {10, 20, 30};
  sl.responses = {r};
  r.type = kolo::Response::Type::kError;
  r.names = {"fc1.w"};
  r.error = "allreduce \"fc1.w\": shape [120,400] on ranks 0,2 but [120,401] on rank 1";
  sl.responses.push_back(r);
  write(dir + "/responses-two", kolo::encode(sl));
  r.type = kolo::Response::Type::kAlltoall;
  r.names = {"tokens"};
  r.sizes = {0, 2, 3, 1};
  r.error.clear();
  sl.responses.push_back(r);
  r.type = kolo::Response::Type::kReducescatter;
  r.names = {"grads[0]", "grads[1]"};
  r.sizes = {6, 9};
  sl.responses.push_back(r);
  write(dir + "/responses-new-kinds", kolo::encode(sl));
  sl.responses.resize(2);
  sl.has_params = true;
  sl.fusion_threshold_bytes = 1 << 22;
  sl.cycle_time_ms = 0.5;
  sl.cpu_chunk_bytes = 1 << 20;
  sl.shutdown = true;
  sl.shutdown_reason = "stall";
  write(dir + "/responses-params", kolo::encode(sl));
  sl.shutdown = false;
  sl.has_params = false;
  sl.responses[0].joined = {1, 2};
  sl.responses[0].row_shape = {3};
  sl.join_done = true;
  sl.last_joined = 2;
  write(dir + "/responses-join", kolo::encode(sl));
  sl.join_done = false;
  sl.responses[0].joined.clear();
  sl.responses[0].row_shape.clear();
  sl.responses[0].process_set = 1;
  sl.responses[0].root = 1;
  write(dir + "/responses-process-set", kolo::encode(sl));
  return 0;
}
