// KVStore::create and the argument checks every type shares: kolo/kvstore.h.
#include "kolo/kvstore.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "kolo/runtime.h"
#include "kvstore/stores.h"

namespace kolo {

std::unique_ptr<KVStore> KVStore::create(const std::string& type) {
  Config config;
  throw_if_error(Config::from_env(&config));
  if (type == "local" || type == "allreduce") {
    if (type == "allreduce" && !is_initialized())
      throw Error(Status::invalid_argument("KVStore::create(\"allreduce\"): call kolo::init() first"));
    if (type == "allreduce" && config.num_servers > 0)
      throw Error(Status::invalid_argument("KVStore \"allreduce\" has no servers, but KOLO_NUM_SERVERS=" +
                                           std::to_string(config.num_servers) + " (unset it, or use dist_sync)"));
    return kv::make_local_store(type);
  }
  if (type == "dist_sync" || type == "dist_async" || type == "dist") {
    if (!is_initialized())
      throw Error(Status::invalid_argument("KVStore::create(\"" + type + "\"): call kolo::init() first"));
    return kv::make_dist_store(type == "dist" ? "dist_sync" : type, config);
  }
  throw Error(Status::invalid_argument("KVStore::create: unknown type \"" + type +
                                       "\" (expected local, allreduce, dist_sync or dist_async)"));
}

KVStore::~KVStore() = default;

void KVStore::run_server(KVUpdater /*updater*/) {
  throw Error(Status::invalid_argument("KVStore::run_server: this rank is not a server of a dist KVStore (type \"" +
                                       type_ + "\")"));
}

const Shape* KVStore::known_shape(int key) const {
  auto it = std::lower_bound(shapes_.begin(), shapes_.end(), key,
                             [](const std::pair<int, Shape>& e, int k) { return e.first < k; });
  return it != shapes_.end() && it->first == key ? &it->second : nullptr;
}

std::vector<KVStore::Item> KVStore::check(const char* what, const std::vector<int>& keys,
                                          const std::vector<TensorView>& values, bool sum_duplicates,
                                          std::vector<std::vector<float>>* sums) const {
  auto fail = [&](const std::string& m) { throw Error(Status::invalid_argument("KVStore " + type_ + " " + what + m)); };
  if (is_server()) fail(": this rank is a server (call run_server())");
  if (keys.size() != values.size())
    fail(": " + std::to_string(keys.size()) + " keys but " + std::to_string(values.size()) + " values");
  std::vector<Item> items;
  for (size_t i = 0; i < keys.size(); ++i) {
    const TensorView& v = values[i];
    const std::string key = " key " + std::to_string(keys[i]);
    if (v.dtype != DType::kFloat32) fail(key + ": dtype " + std::string(dtype_name(v.dtype)) + ", but the store holds float32");
    if (!v.device.is_cpu()) fail(key + ": a GPU tensor; the store takes CPU memory");
    if (v.data == nullptr && v.num_elements() > 0) fail(key + ": null data");
    const Shape* known = known_shape(keys[i]);
    if (std::string(what) != "init") {
      if (known == nullptr) fail(key + ": not initialised (call init first)");
      if (*known != v.shape)
        fail(key + ": shape " + shape_string(v.shape) + " but init gave " + shape_string(*known));
    }
    Item item{keys[i], static_cast<float*>(v.data), v.num_elements(), v.shape};
    auto same = std::find_if(items.begin(), items.end(), [&](const Item& e) { return e.key == item.key; });
    if (!sum_duplicates || same == items.end()) {
      items.push_back(item);
      continue;
    }
    // Another value of a key already in this push: sum into a buffer the store owns.
    if (sums->empty() || same->data != sums->back().data()) {
      sums->emplace_back(same->data, same->data + same->size);
      same->data = sums->back().data();
    }
    for (int64_t e = 0; e < item.size; ++e) same->data[e] += item.data[e];
  }
  return items;
}

void KVStore::init(int key, const TensorView& value) { init(std::vector<int>{key}, std::vector<TensorView>{value}); }

void KVStore::init(const std::vector<int>& keys, const std::vector<TensorView>& values) {
  std::vector<std::vector<float>> unused;
  auto items = check("init", keys, values, false, &unused);
  for (const Item& it : items) {
    if (known_shape(it.key) != nullptr)
      throw Error(Status::invalid_argument("KVStore " + type_ + " init key " + std::to_string(it.key) +
                                           ": already initialised"));
    for (const Item& other : items)
      if (&other != &it && other.key == it.key)
        throw Error(Status::invalid_argument("KVStore " + type_ + " init key " + std::to_string(it.key) +
                                             ": given twice in one call"));
  }
  do_init(items);
  for (const Item& it : items) {
    auto pos = std::lower_bound(shapes_.begin(), shapes_.end(), it.key,
                                [](const std::pair<int, Shape>& e, int k) { return e.first < k; });
    shapes_.insert(pos, {it.key, it.shape});
  }
}

void KVStore::push(int key, const TensorView& value, int priority) {
  push(std::vector<int>{key}, std::vector<TensorView>{value}, priority);
}

void KVStore::push(const std::vector<int>& keys, const std::vector<TensorView>& values, int /*priority*/) {
  std::vector<std::vector<float>> sums;
  sums.reserve(keys.size());  // items point into it: no reallocation
  do_push(check("push", keys, values, true, &sums));
}

void KVStore::pull(int key, const TensorView& out, int priority) {
  pull(std::vector<int>{key}, std::vector<TensorView>{out}, priority);
}

void KVStore::pull(const std::vector<int>& keys, const std::vector<TensorView>& outs, int /*priority*/) {
  std::vector<std::vector<float>> unused;
  do_pull(check("pull", keys, outs, false, &unused));
}

void KVStore::pushpull(const std::vector<int>& keys, const std::vector<TensorView>& values,
                       const std::vector<TensorView>& outs, int priority) {
  push(keys, values, priority);
  pull(keys, outs, priority);
}

namespace kv {

Status write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Status::invalid_argument("cannot write \"" + tmp + "\"");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = done == bytes.size() && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::invalid_argument("cannot write \"" + path + "\"");
  }
  return Status::ok();
}

Status read_file(const std::string& path, std::vector<uint8_t>* bytes) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::invalid_argument("cannot read \"" + path + "\"");
  bytes->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return Status::ok();
}

}  // namespace kv
}  // namespace kolo
