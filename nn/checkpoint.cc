// Checkpoint serialisation, validation and atomic file replacement.
#include "nn/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nn/model.h"

namespace kolo::nn {
namespace {

constexpr char kMagic[8] = {'K', 'O', 'L', 'O', 'C', 'K', 'P', 'T'};
constexpr size_t kHeader = 8 + 4 + 4 + 8 + 4;

template <class T>
void put_le(std::vector<uint8_t>& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

template <class T>
T get_le(const uint8_t* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(T{p[i]} << (8 * i));
  return v;
}

uint32_t crc_of(std::span<const uint8_t> b) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed in pieces for payloads over 4 GiB.
  for (size_t off = 0; off < b.size(); off += 1u << 30) {
    const size_t n = std::min<size_t>(b.size() - off, 1u << 30);
    crc = crc32(crc, b.data() + off, static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}

std::string errno_text() { return std::strerror(errno); }

void write_all(int fd, const std::vector<uint8_t>& b, const std::string& path) {
  size_t off = 0;
  while (off < b.size()) {
    const ssize_t n = ::write(fd, b.data() + off, b.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw CheckpointError(path + ": write failed: " + errno_text());
    off += static_cast<size_t>(n);
  }
}

// Text description of a store's tensors, "name [shape]\n" per tensor.
std::string layout(const ParamStore& s) {
  std::string out;
  for (const auto& p : s.infos()) out += p.name + " " + dims_string(p.shape) + "\n";
  return out;
}

// The first line where two layouts differ, for the error message.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 0;; ++line) {
    const bool ha = static_cast<bool>(std::getline(sa, la));
    const bool hb = static_cast<bool>(std::getline(sb, lb));
    if (!ha && !hb) return "identical";
    if (la != lb || ha != hb) {
      return "tensor " + std::to_string(line) + ": checkpoint has \"" + (ha ? la : "<none>") +
             "\", model has \"" + (hb ? lb : "<none>") + "\"";
    }
  }
}

}  // namespace

void Checkpoint::put(const std::string& name, std::vector<uint8_t> bytes) {
  sections_[name] = std::move(bytes);
}

void Checkpoint::put_floats(const std::string& name, std::span<const float> v) {
  std::vector<uint8_t> b(v.size_bytes());
  std::memcpy(b.data(), v.data(), b.size());
  put(name, std::move(b));
}

void Checkpoint::put_string(const std::string& name, const std::string& s) {
  put(name, std::vector<uint8_t>(s.begin(), s.end()));
}

void Checkpoint::put_i64(const std::string& name, int64_t v) {
  std::vector<uint8_t> b;
  put_le<uint64_t>(b, static_cast<uint64_t>(v));
  put(name, std::move(b));
}

const std::vector<uint8_t>& Checkpoint::get(const std::string& name) const {
  const auto it = sections_.find(name);
  if (it == sections_.end()) throw CheckpointError(origin_ + ": has no section \"" + name + "\"");
  return it->second;
}

void Checkpoint::get_floats(const std::string& name, std::span<float> out) const {
  const auto& b = get(name);
  if (b.size() != out.size_bytes()) {
    throw CheckpointError(origin_ + ": section \"" + name + "\" holds " +
                          std::to_string(b.size() / sizeof(float)) + " floats, expected " +
                          std::to_string(out.size()));
  }
  std::memcpy(out.data(), b.data(), b.size());
}

std::string Checkpoint::get_string(const std::string& name) const {
  const auto& b = get(name);
  return {b.begin(), b.end()};
}

int64_t Checkpoint::get_i64(const std::string& name) const {
  const auto& b = get(name);
  if (b.size() != 8) throw CheckpointError(origin_ + ": section \"" + name + "\" is not an integer");
  return static_cast<int64_t>(get_le<uint64_t>(b.data()));
}

std::vector<uint8_t> Checkpoint::serialize() const {
  std::vector<uint8_t> payload;
  for (const auto& [name, data] : sections_) {
    put_le<uint32_t>(payload, static_cast<uint32_t>(name.size()));
    payload.insert(payload.end(), name.begin(), name.end());
    put_le<uint64_t>(payload, data.size());
    payload.insert(payload.end(), data.begin(), data.end());
  }
  std::vector<uint8_t> out(kMagic, kMagic + 8);
  put_le<uint32_t>(out, kVersion);
  put_le<uint32_t>(out, static_cast<uint32_t>(sections_.size()));
  put_le<uint64_t>(out, payload.size());
  put_le<uint32_t>(out, crc_of(payload));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Checkpoint Checkpoint::parse(std::span<const uint8_t> b, const std::string& origin) {
  auto fail = [&](const std::string& what) { return CheckpointError(origin + ": " + what); };
  if (b.size() < kHeader) {
    throw fail("truncated: " + std::to_string(b.size()) + " bytes, shorter than the " +
               std::to_string(kHeader) + "-byte header");
  }
  if (std::memcmp(b.data(), kMagic, 8) != 0) throw fail("not a kolo checkpoint (bad magic)");
  const auto version = get_le<uint32_t>(b.data() + 8);
  if (version != kVersion) {
    throw fail("format version " + std::to_string(version) + " is not supported (this build reads " +
               std::to_string(kVersion) + ")");
  }
  const auto count = get_le<uint32_t>(b.data() + 12);
  const auto length = get_le<uint64_t>(b.data() + 16);
  const auto crc = get_le<uint32_t>(b.data() + 24);
  if (length != b.size() - kHeader) {
    throw fail(std::string(length > b.size() - kHeader ? "truncated" : "trailing bytes") +
               ": header says " + std::to_string(length) + " payload bytes, file has " +
               std::to_string(b.size() - kHeader));
  }
  const auto payload = b.subspan(kHeader);
  if (crc_of(payload) != crc) throw fail("checksum mismatch: the file is corrupt");
  Checkpoint ck;
  ck.origin_ = origin;
  size_t off = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (payload.size() - off < 4) throw fail("malformed section table");
    const auto nlen = get_le<uint32_t>(payload.data() + off);
    off += 4;
    if (payload.size() - off < nlen + 8ull) throw fail("malformed section table");
    std::string name(payload.begin() + off, payload.begin() + off + nlen);
    off += nlen;
    const auto dlen = get_le<uint64_t>(payload.data() + off);
    off += 8;
    if (payload.size() - off < dlen) throw fail("malformed section \"" + name + "\"");
    ck.sections_[name].assign(payload.begin() + off, payload.begin() + off + dlen);
    off += dlen;
  }
  if (off != payload.size()) throw fail("malformed section table (bytes left over)");
  return ck;
}

void Checkpoint::write_file(const std::string& path) const {
  const auto bytes = serialize();
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw CheckpointError(tmp + ": cannot create: " + errno_text());
  try {
    write_all(fd, bytes, tmp);
    if (::fsync(fd) != 0) throw CheckpointError(tmp + ": fsync failed: " + errno_text());
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = errno_text();
    ::unlink(tmp.c_str());
    throw CheckpointError(path + ": rename from " + tmp + " failed: " + err);
  }
  // Make the rename itself durable.
  auto dir = std::filesystem::path(path).parent_path();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

Checkpoint Checkpoint::read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(path + ": cannot open: " + errno_text());
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw CheckpointError(path + ": read failed");
  return parse(bytes, path);
}

void save_model(Checkpoint& ck, const Model& m) {
  ck.put_string("model.arch", m.arch());
  ck.put_string("model.input", dims_string(m.input_shape()));
  ck.put_string("model.params.layout", layout(m.params()));
  ck.put_string("model.buffers.layout", layout(m.buffers()));
  ck.put_floats("model.params", m.params().values());
  ck.put_floats("model.buffers", m.buffers().values());
  ck.put_string("model.rng", m.rng().state());
}

void load_model(const Checkpoint& ck, Model& m) {
  const std::string arch = ck.get_string("model.arch");
  const std::string input = ck.get_string("model.input");
  if (arch != m.arch() || input != dims_string(m.input_shape())) {
    throw CheckpointError("checkpoint is for model " + arch + " with input " + input +
                          ", but this run builds " + m.arch() + " with input " +
                          dims_string(m.input_shape()));
  }
  for (const char* which : {"params", "buffers"}) {
    const ParamStore& s = std::string(which) == "params" ? m.params() : m.buffers();
    const std::string have = ck.get_string(std::string("model.") + which + ".layout");
    if (have != layout(s)) {
      throw CheckpointError(std::string("checkpoint's model ") + which +
                            " do not match this model: " + first_difference(have, layout(s)));
    }
  }
  ck.get_floats("model.params", m.params().values());
  ck.get_floats("model.buffers", m.buffers().values());
  try {
    m.rng().set_state(ck.get_string("model.rng"));
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(std::string("checkpoint's section \"model.rng\": ") + e.what());
  }
}

}  // namespace kolo::nn
