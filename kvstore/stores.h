// kvstore/stores.h — the KVStore implementations behind KVStore::create (internal).
//   local_store.cc: "local" and "allreduce" (weights on every worker);
//   dist_store.cc:  "dist_sync" and "dist_async" (weights on the servers).
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "kolo/kvstore.h"

namespace kolo::kv {

std::unique_ptr<KVStore> make_local_store(const std::string& type);
std::unique_ptr<KVStore> make_dist_store(const std::string& type, const Config& config);

// Writes `bytes` to `path` through a temporary file, fsync and rename (never half a file).
Status write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes);
Status read_file(const std::string& path, std::vector<uint8_t>* bytes);

}  // namespace kolo::kv
