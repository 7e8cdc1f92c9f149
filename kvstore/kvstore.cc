// KVStore::create and the argument checks every type shares: kolo/kvstore.h.
#include "kolo/kvstore.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>

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

const KVStore::Known* KVStore::known(int key) const {
  auto it = std::lower_bound(known_.begin(), known_.end(), key,
                             [](const std::pair<int, Known>& e, int k) { return e.first < k; });
  return it != known_.end() && it->first == key ? &it->second : nullptr;
}

const Shape* KVStore::known_shape(int key) const {
  const Known* k = known(key);
  return k ? &k->shape : nullptr;
}

namespace {

float element(const TensorView& v, int64_t e) {
  switch (v.dtype) {
    case DType::kFloat16: return half_to_float(static_cast<const Half*>(v.data)[e]);
    case DType::kBFloat16: return bf16_to_float(static_cast<const BFloat16*>(v.data)[e]);
    default: return static_cast<const float*>(v.data)[e];
  }
}

void set_element(const TensorView& v, int64_t e, float x) {
  switch (v.dtype) {
    case DType::kFloat16: static_cast<Half*>(v.data)[e] = float_to_half(x); break;
    case DType::kBFloat16: static_cast<BFloat16*>(v.data)[e] = float_to_bf16(x); break;
    default: static_cast<float*>(v.data)[e] = x;
  }
}

}  // namespace

// Buffers the store owns for one call: float32 copies of 16-bit values and sums of a key's
// values; `pulled` lists the 16-bit outputs to fill from their buffers after the pull.
struct KVStore::Staging {
  std::vector<std::unique_ptr<float[]>> buffers;
  std::vector<std::pair<TensorView, const float*>> pulled;

  float* copy_of(const TensorView& v, bool read) {
    const int64_t n = v.num_elements();
    buffers.push_back(std::make_unique<float[]>(static_cast<size_t>(std::max<int64_t>(n, 1))));
    float* b = buffers.back().get();
    if (read)
      for (int64_t e = 0; e < n; ++e) b[e] = element(v, e);
    return b;
  }
  bool owns(const float* p) const {
    return std::any_of(buffers.begin(), buffers.end(), [p](const auto& b) { return b.get() == p; });
  }
  void write_pulled() const {
    for (const auto& [out, from] : pulled)
      for (int64_t e = 0; e < out.num_elements(); ++e) set_element(out, e, from[e]);
  }
};

std::vector<KVStore::Item> KVStore::check(const char* what, const std::vector<int>& keys,
                                          const std::vector<TensorView>& values, bool sum_duplicates,
                                          Staging* staging) const {
  auto fail = [&](const std::string& m) { throw Error(Status::invalid_argument("KVStore " + type_ + " " + what + m)); };
  if (is_server()) fail(": this rank is a server (call run_server())");
  if (keys.size() != values.size())
    fail(": " + std::to_string(keys.size()) + " keys but " + std::to_string(values.size()) + " values");
  const bool is_init = std::string(what) == "init", is_pull = std::string(what) == "pull";
  std::vector<Item> items;
  for (size_t i = 0; i < keys.size(); ++i) {
    const TensorView& v = values[i];
    const std::string key = " key " + std::to_string(keys[i]);
    if (v.dtype != DType::kFloat32 && v.dtype != DType::kFloat16 && v.dtype != DType::kBFloat16)
      fail(key + ": dtype " + std::string(dtype_name(v.dtype)) +
           ", but the store holds float32 (float16 and bfloat16 values convert to it)");
    if (!v.device.is_cpu()) fail(key + ": a GPU tensor; the store takes CPU memory");
    if (v.data == nullptr && v.num_elements() > 0) fail(key + ": null data");
    const Known* k = known(keys[i]);
    if (!is_init) {
      if (k == nullptr) fail(key + ": not initialised (call init first)");
      if (k->shape != v.shape) fail(key + ": shape " + shape_string(v.shape) + " but init gave " + shape_string(k->shape));
      if (k->dtype != v.dtype)
        fail(key + ": dtype " + std::string(dtype_name(v.dtype)) + " but init gave " + std::string(dtype_name(k->dtype)));
    }
    Item item{keys[i], static_cast<float*>(v.data), v.num_elements(), v.shape, v.dtype};
    auto same = std::find_if(items.begin(), items.end(), [&](const Item& e) { return e.key == item.key; });
    if (!sum_duplicates || same == items.end()) {
      if (v.dtype != DType::kFloat32) {
        item.data = staging->copy_of(v, !is_pull);
        if (is_pull) staging->pulled.push_back({v, item.data});
      }
      items.push_back(item);
      continue;
    }
    // Another value of a key already in this push: sum into a buffer the store owns.
    if (!staging->owns(same->data)) {
      same->data = staging->copy_of(TensorView::of(same->data, same->shape), true);
    }
    for (int64_t e = 0; e < item.size; ++e) same->data[e] += element(v, e);
  }
  return items;
}

void KVStore::init(int key, const TensorView& value) { init(std::vector<int>{key}, std::vector<TensorView>{value}); }

void KVStore::init(const std::vector<int>& keys, const std::vector<TensorView>& values) {
  Staging staging;
  auto items = check("init", keys, values, false, &staging);
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
  for (size_t i = 0; i < items.size(); ++i) {
    auto pos = std::lower_bound(known_.begin(), known_.end(), items[i].key,
                                [](const std::pair<int, Known>& e, int k) { return e.first < k; });
    known_.insert(pos, {items[i].key, Known{items[i].shape, values[i].dtype}});
  }
}

void KVStore::push(int key, const TensorView& value, int priority) {
  push(std::vector<int>{key}, std::vector<TensorView>{value}, priority);
}

void KVStore::push(const std::vector<int>& keys, const std::vector<TensorView>& values, int /*priority*/) {
  Staging staging;
  do_push(check("push", keys, values, true, &staging));
}

void KVStore::pull(int key, const TensorView& out, int priority) {
  pull(std::vector<int>{key}, std::vector<TensorView>{out}, priority);
}

void KVStore::pull(const std::vector<int>& keys, const std::vector<TensorView>& outs, int /*priority*/) {
  Staging staging;
  do_pull(check("pull", keys, outs, false, &staging));
  staging.write_pulled();
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
