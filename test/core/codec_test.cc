// The negotiation codec: every message survives a round trip, and no truncated or corrupt
// message is accepted or crashes the decoder.
#include <catch2/catch.hpp>

#include <random>

#include "core/message.h"

using namespace kolo;

namespace {

Request random_request(std::mt19937& rng, int i) {
  Request q;
  q.rank = static_cast<int32_t>(rng() % 64);
  q.kind = static_cast<OpKind>(rng() % kNumOpKinds);
  q.reduce_op = static_cast<ReduceOp>(rng() % kNumReduceOps);
  q.dtype = static_cast<DType>(rng() % kNumDTypes);
  q.device = (rng() % 2) ? Device::cpu() : Device::gpu(static_cast<int>(rng() % 8));
  q.root = static_cast<int32_t>(rng() % 16);
  q.prescale = 0.25 * (rng() % 9);
  q.postscale = 1.0 / (1 + rng() % 7);
  for (unsigned d = 0; d < rng() % 5; ++d) q.shape.push_back(static_cast<int64_t>(rng() % 1000));
  q.name = "layer." + std::to_string(i) + (rng() % 2 ? ".weight" : ".bias");
  if (q.kind == OpKind::kAlltoall)
    for (unsigned d = 0; d < rng() % 6; ++d) q.splits.push_back(static_cast<int64_t>(rng() % 100));
  if (rng() % 3 == 0) {
    q.group = "group." + std::to_string(rng() % 10);
    q.group_size = static_cast<int32_t>(1 + rng() % 200);
  }
  q.process_set = static_cast<int32_t>(rng() % 3);
  if (rng() % 4 == 0) q.refused = "allreduce \"" + q.name + "\": refused " + std::to_string(rng() % 100);
  return q;
}

}  // namespace

TEST_CASE("request lists survive encode/decode unchanged", "[codec]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    RequestList list;
    for (int i = 0; i < trial; ++i) list.requests.push_back(random_request(rng, i));
    list.shutdown = trial % 3 == 0;
    list.shutdown_ack = trial % 4 == 0;
    list.join = trial % 5 == 0;
    for (int c = 0; c < trial % 7; ++c) list.cached.push_back(static_cast<uint32_t>(rng()));
    for (int c = 0; c < trial % 5; ++c)
      list.set_cached.push_back({static_cast<int32_t>(rng() % 9), static_cast<uint32_t>(rng())});
    if (list.shutdown) list.shutdown_reason = "rank " + std::to_string(trial) + " received SIGTERM";
    auto bytes = encode(list);
    RequestList back;
    REQUIRE(decode(bytes.data(), bytes.size(), &back).is_ok());
    CHECK(back == list);
  }
}

TEST_CASE("response lists survive encode/decode unchanged", "[codec]") {
  ResponseList list;
  list.shutdown = true;
  list.shutdown_reason = "kolo was shut down by rank 3";
  Response a;
  a.type = Response::Type::kAllreduce;
  a.names = {"a", "b", "c"};
  a.sizes = {1, 0, 1 << 20};
  a.dtype = DType::kBFloat16;
  a.reduce_op = ReduceOp::kMax;
  a.prescale = 0.5;
  Response e;
  e.type = Response::Type::kError;
  e.names = {"fc1.w"};
  e.error = "allreduce \"fc1.w\": shape [120,400] on ranks 0,2 but [120,401] on rank 1";
  e.ranks = {0, 2};  // an error addressed to some ranks (MessageTable::fail_pending)
  Response g;
  g.type = Response::Type::kAllgather;
  g.names = {"rows"};
  g.sizes = {3, 0, 5};
  g.device = Device::gpu(2);
  Response t;
  t.type = Response::Type::kAlltoall;
  t.names = {"tokens"};
  t.sizes = {0, 2, 3, 1};  // 2 ranks: rows src -> dst
  t.dtype = DType::kInt64;
  Response rs;
  rs.type = Response::Type::kReducescatter;
  rs.names = {"g[0]", "g[1]"};
  rs.sizes = {7, 12};
  rs.reduce_op = ReduceOp::kProduct;
  rs.postscale = 0.125;
  rs.process_set = 3;
  g.joined = {1, 3};
  g.row_shape = {4, 2};
  a.joined = {0};
  list.responses = {a, e, g, t, rs};
  list.join_done = true;
  list.last_joined = 2;
  list.has_params = true;
  list.fusion_threshold_bytes = 8u << 20;
  list.cycle_time_ms = 0.25;
  list.cpu_chunk_bytes = 512u << 10;
  auto bytes = encode(list);
  ResponseList back;
  REQUIRE(decode(bytes.data(), bytes.size(), &back).is_ok());
  CHECK(back == list);
}

TEST_CASE("every truncation of a message is refused with an error", "[codec]") {
  std::mt19937 rng(11);
  RequestList list;
  for (int i = 0; i < 4; ++i) list.requests.push_back(random_request(rng, i));
  auto bytes = encode(list);
  for (size_t n = 0; n < bytes.size(); ++n) {
    RequestList back;
    Status s = decode(bytes.data(), n, &back);
    INFO("truncated to " << n << " of " << bytes.size() << " bytes");
    CHECK_FALSE(s.is_ok());
  }
}

TEST_CASE("corrupted bytes never crash the decoder", "[codec]") {
  std::mt19937 rng(13);
  ResponseList list;
  Response r;
  r.names = {"x", "y"};
  r.sizes = {4, 5};
  list.responses = {r, r};
  const auto clean = encode(list);
  int refused = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    auto bytes = clean;
    bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    ResponseList back;
    if (!decode(bytes.data(), bytes.size(), &back).is_ok()) ++refused;
  }
  CHECK(refused > 0);  // some corruptions are detectable (magic, enums, lengths)
  RequestList wrong_kind;
  CHECK_FALSE(decode(clean.data(), clean.size(), &wrong_kind).is_ok());  // response is not a request
}
