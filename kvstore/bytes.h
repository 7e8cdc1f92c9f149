// kvstore/bytes.h — appending plain values to a byte buffer and reading them back, for the
// store's messages and its optimizer-state files. The reader never reads past the end: a
// short or corrupt buffer makes ok() false (callers turn that into an error naming what).
// Thread safety: values.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace kolo::kv {

class ByteWriter {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& s) {
    put(static_cast<uint64_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void put_floats(const float* p, int64_t n) {
    put(static_cast<uint64_t>(n));
    const auto* b = reinterpret_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + static_cast<size_t>(n) * sizeof(float));
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  template <class T>
  T get() {
    T v{};
    if (!take(sizeof(T))) return v;
    std::memcpy(&v, p_ - sizeof(T), sizeof(T));
    return v;
  }
  std::string get_string() {
    const auto n = get<uint64_t>();
    if (!take(n)) return {};
    return std::string(reinterpret_cast<const char*>(p_ - n), n);
  }
  std::vector<float> get_floats() {
    const auto n = get<uint64_t>();
    if (n > static_cast<uint64_t>(end_ - p_) / sizeof(float) || !take(n * sizeof(float))) {
      ok_ = false;
      return {};
    }
    std::vector<float> v(n);
    if (n > 0) std::memcpy(v.data(), p_ - n * sizeof(float), n * sizeof(float));  // an empty vector's data() may be null
    return v;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return p_ == end_; }

 private:
  bool take(uint64_t n) {
    if (!ok_ || n > static_cast<uint64_t>(end_ - p_)) {
      ok_ = false;
      return false;
    }
    p_ += n;
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

}  // namespace kolo::kv
