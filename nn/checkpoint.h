// nn/checkpoint.h — checkpoint files: named binary sections behind a versioned,
// checksummed header, written atomically.
//
// File layout (little-endian):
//   "KOLOCKPT" | u32 version | u32 sections | u64 payload bytes | u32 crc32(payload)
//   payload = sections, each: u32 name length | name | u64 data length | data
// Writing goes to "<path>.tmp", fsync, rename over <path>, fsync of the directory: a crash
// at any point leaves either the old complete file or the new complete file, never a mix,
// so the previous checkpoint is never damaged.
// Reading refuses (CheckpointError naming the file and the defect) a file that is
// truncated, has a bad magic/version, fails its checksum or lacks a section; load_model()
// refuses one written for another architecture or with other tensor names/shapes.
// Ownership: a Checkpoint owns copies of its sections. Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace kolo::nn {

class Model;

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Checkpoint {
 public:
  static constexpr uint32_t kVersion = 1;

  void put(const std::string& name, std::vector<uint8_t> bytes);
  void put_floats(const std::string& name, std::span<const float> v);
  void put_string(const std::string& name, const std::string& s);
  void put_i64(const std::string& name, int64_t v);

  bool has(const std::string& name) const { return sections_.count(name) != 0; }
  const std::vector<uint8_t>& get(const std::string& name) const;
  // Copies a float section into `out`, which must have exactly its element count.
  void get_floats(const std::string& name, std::span<float> out) const;
  std::string get_string(const std::string& name) const;
  int64_t get_i64(const std::string& name) const;

  std::vector<uint8_t> serialize() const;
  // `origin` (a file name) prefixes error messages.
  static Checkpoint parse(std::span<const uint8_t> bytes, const std::string& origin);
  void write_file(const std::string& path) const;
  static Checkpoint read_file(const std::string& path);

 private:
  std::string origin_ = "checkpoint";
  std::map<std::string, std::vector<uint8_t>> sections_;
};

// Sections "model.*": architecture, tensor names and shapes, parameters, buffers and the
// model's Rng state.
void save_model(Checkpoint& ck, const Model& m);
void load_model(const Checkpoint& ck, Model& m);

}  // namespace kolo::nn
