// kvstore/sharding.h — who is a server, and which server holds which elements of a key.
//
// Roles: of `size` ranks, the last `servers` are servers and the first size-servers are
// workers, so worker w is rank w (kolo::rank() of a worker is its worker index).
// Placement (as ps-lite/MXNet do it): a key smaller than `bigarray_bound` elements lives
// whole on one server, chosen by the key (key * 9973 mod servers, MXNet's hash) so small keys
// spread over the servers; a key of at least `bigarray_bound` elements is cut into `servers`
// contiguous slices of nearly equal size, one per server, so one big layer does not load
// one server's link with all of its traffic.
// Pure functions: no peers, unit-tested alone.
#pragma once

#include <cstdint>
#include <vector>

namespace kolo::kv {

struct Roles {
  int workers = 1, servers = 0;
  bool is_server(int rank) const { return rank >= workers; }
  int server_rank(int server) const { return workers + server; }  // server index -> rank
};

struct Slice {
  int server = 0;       // server index 0..servers-1
  int64_t offset = 0;   // first element of the key held there
  int64_t size = 0;     // elements
};

// Slices of a key of `size` elements, in element order, none empty (none for size 0).
std::vector<Slice> place_key(int key, int64_t size, int servers, int64_t bigarray_bound);

}  // namespace kolo::kv
