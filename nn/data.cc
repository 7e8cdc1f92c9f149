// IDX and CIFAR-10 readers, synthetic data, normalisation and batch assembly.
#include "nn/data.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

namespace kolo::nn {
namespace {

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Whole (decompressed) contents of a gzip or plain file.
std::vector<uint8_t> read_gz(const std::string& path) {
  if (!std::filesystem::exists(path)) throw DataError(path + ": no such file");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw DataError(path + ": cannot open: " + std::strerror(errno));
  std::unique_ptr<gzFile_s, int (*)(gzFile)> guard(f, gzclose);
  std::vector<uint8_t> out;
  std::vector<uint8_t> chunk(1 << 20);
  for (;;) {
    const int n = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int err = 0;
      throw DataError(path + ": corrupt or truncated gzip data (" + gzerror(f, &err) + ")");
    }
    if (n == 0) break;
    out.insert(out.end(), chunk.begin(), chunk.begin() + n);
  }
  // zlib reports a gzip stream cut short as end-of-file without an error on some paths;
  // gzerror then says so.
  int err = Z_OK;
  const char* msg = gzerror(f, &err);
  if (err != Z_OK && err != Z_STREAM_END) {
    throw DataError(path + ": corrupt or truncated gzip data (" + msg + ")");
  }
  return out;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Validates an IDX header (u8 data, `ndims` dimensions) and returns the dimensions.
std::vector<uint32_t> idx_dims(const std::string& path, const std::vector<uint8_t>& b,
                               int ndims) {
  const uint32_t want = 0x00000800u | static_cast<uint32_t>(ndims);
  const size_t header = 4 + 4 * static_cast<size_t>(ndims);
  if (b.size() < 4) throw DataError(path + ": too short for an IDX header (" + std::to_string(b.size()) + " bytes)");
  const uint32_t magic = be32(b.data());
  if (magic != want) {
    throw DataError(path + ": bad IDX magic " + hex32(magic) + ", expected " + hex32(want) +
                    " (unsigned bytes, " + std::to_string(ndims) + " dimensions)");
  }
  if (b.size() < header) throw DataError(path + ": truncated IDX header");
  std::vector<uint32_t> dims;
  uint64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    dims.push_back(be32(b.data() + 4 + 4 * i));
    total *= dims.back();
  }
  if (b.size() - header != total) {
    throw DataError(path + ": header promises " + std::to_string(total) + " bytes of data but " +
                    std::to_string(b.size() - header) + " follow (" +
                    (b.size() - header < total ? "truncated" : "trailing garbage") + ")");
  }
  return dims;
}

std::string first_existing(const std::string& dir, const std::string& stem) {
  for (const char* ext : {".gz", ""}) {
    const auto p = std::filesystem::path(dir) / (stem + ext);
    if (std::filesystem::exists(p)) return p.string();
  }
  throw DataError(dir + ": neither " + stem + ".gz nor " + stem + " found");
}

}  // namespace

Dataset load_idx(const std::string& images_path, const std::string& labels_path) {
  const auto ib = read_gz(images_path);
  const auto lb = read_gz(labels_path);
  const auto idims = idx_dims(images_path, ib, 3);
  const auto ldims = idx_dims(labels_path, lb, 1);
  if (idims[0] != ldims[0]) {
    throw DataError(images_path + " has " + std::to_string(idims[0]) + " images but " +
                    labels_path + " has " + std::to_string(ldims[0]) + " labels");
  }
  Dataset d;
  d.name = std::filesystem::path(images_path).filename().string();
  d.sample_shape = {1, static_cast<int>(idims[1]), static_cast<int>(idims[2])};
  d.num_classes = 10;
  d.images.resize(ib.size() - 16);
  for (size_t i = 0; i < d.images.size(); ++i) d.images[i] = ib[16 + i] / 255.0f;
  d.labels.resize(idims[0]);
  for (size_t i = 0; i < d.labels.size(); ++i) {
    d.labels[i] = lb[8 + i];
    if (d.labels[i] >= d.num_classes) {
      throw DataError(labels_path + ": label " + std::to_string(d.labels[i]) + " of item " +
                      std::to_string(i) + " is outside [0,10)");
    }
  }
  return d;
}

Dataset load_mnist_dir(const std::string& dir, bool train) {
  if (!std::filesystem::is_directory(dir)) throw DataError(dir + ": no such data folder (give --data-dir the folder with the train-/t10k- IDX files; "
                    "Fashion-MNIST comes with Debian's package: apt-get install dataset-fashion-mnist; "
                    "--dataset synthetic needs no files)");
  const std::string pre = train ? "train" : "t10k";
  return load_idx(first_existing(dir, pre + "-images-idx3-ubyte"),
                  first_existing(dir, pre + "-labels-idx1-ubyte"));
}

Dataset load_cifar10_dir(const std::string& dir, bool train) {
  constexpr size_t kRecord = 1 + 3 * 32 * 32;
  std::vector<std::string> files;
  if (train) {
    for (int i = 1; i <= 5; ++i) files.push_back("data_batch_" + std::to_string(i) + ".bin");
  } else {
    files.push_back("test_batch.bin");
  }
  Dataset d;
  d.name = train ? "cifar10-train" : "cifar10-test";
  d.sample_shape = {3, 32, 32};
  d.num_classes = 10;
  for (const auto& f : files) {
    const std::string path = (std::filesystem::path(dir) / f).string();
    const auto b = read_gz(path);
    if (b.empty() || b.size() % kRecord != 0) {
      throw DataError(path + ": size " + std::to_string(b.size()) +
                      " is not a positive multiple of the 3073-byte CIFAR-10 record");
    }
    for (size_t r = 0; r < b.size() / kRecord; ++r) {
      const uint8_t* rec = b.data() + r * kRecord;
      if (rec[0] > 9) {
        throw DataError(path + ": label " + std::to_string(rec[0]) + " of record " +
                        std::to_string(r) + " is outside [0,10)");
      }
      d.labels.push_back(rec[0]);
      for (size_t i = 1; i < kRecord; ++i) d.images.push_back(rec[i] / 255.0f);
    }
  }
  return d;
}

Dataset make_synthetic(size_t n, const Dims& shape, int num_classes, uint64_t seed) {
  Dataset d;
  d.name = "synthetic";
  d.sample_shape = shape;
  d.num_classes = num_classes;
  Rng rng(seed);
  d.images.resize(n * static_cast<size_t>(dims_product(shape)));
  for (auto& v : d.images) v = static_cast<float>(rng.normal());
  d.labels.resize(n);
  for (auto& l : d.labels) l = static_cast<int32_t>(rng.below(static_cast<uint64_t>(num_classes)));
  return d;
}

ChannelStats channel_stats(const Dataset& d) {
  const int c = d.sample_shape[0];
  const int64_t plane = d.sample_size() / c;
  ChannelStats s;
  for (int ch = 0; ch < c; ++ch) {
    double sum = 0.0, sq = 0.0;
    for (size_t i = 0; i < d.size(); ++i) {
      const float* p = d.images.data() + static_cast<int64_t>(i) * d.sample_size() + ch * plane;
      for (int64_t j = 0; j < plane; ++j) {
        sum += p[j];
        sq += double{p[j]} * p[j];
      }
    }
    const double n = static_cast<double>(d.size()) * plane;
    const double mean = sum / n;
    s.mean.push_back(static_cast<float>(mean));
    s.stddev.push_back(static_cast<float>(std::sqrt(std::max(sq / n - mean * mean, 1e-12))));
  }
  return s;
}

void normalise(Dataset& d, const ChannelStats& s) {
  const int c = d.sample_shape[0];
  const int64_t plane = d.sample_size() / c;
  for (size_t i = 0; i < d.size(); ++i) {
    for (int ch = 0; ch < c; ++ch) {
      float* p = d.images.data() + static_cast<int64_t>(i) * d.sample_size() + ch * plane;
      for (int64_t j = 0; j < plane; ++j) p[j] = (p[j] - s.mean[ch]) / s.stddev[ch];
    }
  }
}

void gather_batch(const Dataset& d, const std::vector<int64_t>& indices, const Augment& aug,
                  Rng& rng, Tensor& x, std::vector<int32_t>& y) {
  const int c = d.sample_shape[0], h = d.sample_shape[1], w = d.sample_shape[2];
  const int n = static_cast<int>(indices.size());
  x.resize({n, c, h, w});
  y.resize(indices.size());
  const int64_t ss = d.sample_size();
  for (int i = 0; i < n; ++i) {
    const int64_t idx = indices[static_cast<size_t>(i)];
    const float* src = d.images.data() + idx * ss;
    float* dst = x.data() + int64_t{i} * ss;
    y[static_cast<size_t>(i)] = d.labels[static_cast<size_t>(idx)];
    const bool flip = aug.flip && rng.below(2) == 1;
    int dy = 0, dx = 0;
    if (aug.pad_crop > 0) {
      dy = static_cast<int>(rng.below(2 * aug.pad_crop + 1)) - aug.pad_crop;
      dx = static_cast<int>(rng.below(2 * aug.pad_crop + 1)) - aug.pad_crop;
    }
    if (!flip && dy == 0 && dx == 0) {
      std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(ss));
      continue;
    }
    // Output pixel (r, q) reads input (r+dy, q'+dx) where q' mirrors q when flipping;
    // outside the image is zero padding.
    for (int ch = 0; ch < c; ++ch) {
      for (int r = 0; r < h; ++r) {
        for (int q = 0; q < w; ++q) {
          const int sr = r + dy, sq = (flip ? w - 1 - q : q) + dx;
          dst[(ch * h + r) * w + q] =
              (sr < 0 || sr >= h || sq < 0 || sq >= w) ? 0.0f : src[(ch * h + sr) * w + sq];
        }
      }
    }
  }
}

}  // namespace kolo::nn
