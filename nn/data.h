// nn/data.h — data sets held in memory: MNIST/Fashion-MNIST (IDX, optionally gzipped),
// CIFAR-10 binary batches, and synthetic data for throughput runs.
//
// Loaders throw DataError whose message names the file and what is wrong with it (missing,
// bad magic, truncated, counts that disagree, labels out of range).
// Ownership: a Dataset owns its samples. Thread safety: const access from any thread.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/random.h"
#include "nn/tensor.h"

namespace kolo::nn {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Dataset {
  std::string name;
  Dims sample_shape;            // [C,H,W]
  int num_classes = 0;
  std::vector<float> images;    // size() * prod(sample_shape), normalised
  std::vector<int32_t> labels;  // size() values in [0, num_classes)

  size_t size() const { return labels.size(); }
  int64_t sample_size() const { return dims_product(sample_shape); }
};

// Options for assembling a batch.
struct Augment {
  bool flip = false;  // mirror left-right with probability 1/2
  int pad_crop = 0;   // pad by this many zeros per side, then crop a random window
};

// Copies samples `indices` into x [n, C, H, W] and y (n labels), augmenting when asked
// (rng is only used then).
void gather_batch(const Dataset& d, const std::vector<int64_t>& indices, const Augment& aug,
                  Rng& rng, Tensor& x, std::vector<int32_t>& y);

// IDX files (http://yann.lecun.com/exdb/mnist/ format): images u8 [N,H,W], labels u8 [N].
// gzip or plain. Pixels are scaled to [0,1] (normalise() standardises them afterwards).
Dataset load_idx(const std::string& images_path, const std::string& labels_path);
// Fashion-MNIST/MNIST in `dir`: train-* or t10k-* with -idx3-ubyte(.gz) names.
Dataset load_mnist_dir(const std::string& dir, bool train);
// CIFAR-10 binary version in `dir`: data_batch_1..5.bin (train) or test_batch.bin.
Dataset load_cifar10_dir(const std::string& dir, bool train);
// `n` Gaussian images of `shape` with uniformly random labels, from `seed`.
Dataset make_synthetic(size_t n, const Dims& shape, int num_classes, uint64_t seed);

// Per-channel mean and standard deviation of `d` (the training set), for normalise().
struct ChannelStats {
  std::vector<float> mean, stddev;
};
ChannelStats channel_stats(const Dataset& d);
void normalise(Dataset& d, const ChannelStats& s);

}  // namespace kolo::nn
