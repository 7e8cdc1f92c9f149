// Key placement across servers: kvstore/sharding.h.
#include "kvstore/sharding.h"

namespace kolo::kv {

std::vector<Slice> place_key(int key, int64_t size, int servers, int64_t bigarray_bound) {
  std::vector<Slice> out;
  if (size <= 0 || servers <= 0) return out;
  if (size < bigarray_bound || servers == 1) {
    const int64_t hashed = (static_cast<int64_t>(key) * 9973) % servers;
    out.push_back({static_cast<int>(hashed < 0 ? hashed + servers : hashed), 0, size});
    return out;
  }
  // Slice s holds [s*size/servers, (s+1)*size/servers): sizes differ by at most one.
  for (int s = 0; s < servers; ++s) {
    const int64_t begin = size * s / servers, end = size * (s + 1) / servers;
    if (end > begin) out.push_back({s, begin, end - begin});
  }
  return out;
}

}  // namespace kolo::kv
