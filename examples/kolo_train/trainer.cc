// The kolo-train loop: data -> model -> broadcast -> epochs of (forward, backward with
// overlapped allreduce, step) -> evaluation over the whole test set -> checkpoint.
#include "examples/kolo_train/trainer.h"

#include "examples/kolo_train/device_engine.h"
#include "examples/kolo_train/kv_path.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <span>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "kolo/kolo.h"
#include "nn/checkpoint.h"
#include "nn/data.h"
#include "nn/gemm.h"
#include "nn/loss.h"
#include "nn/models.h"
#include "nn/sampler.h"
#include "optimizer/distributed_optimizer.h"
#include "optimizer/schedule.h"

namespace kolo::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A well-mixed seed for stream `stream` of `rank` in `epoch` (splitmix64 finaliser), so
// every random stream of the run is a pure function of (seed, rank, epoch): resuming at
// an epoch boundary reproduces the uninterrupted run.
uint64_t stream_seed(uint64_t seed, uint64_t rank, uint64_t epoch, uint64_t stream) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (1 + rank + (epoch << 20) + (stream << 40));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

struct Data {
  nn::Dataset train, test;
};

Data load_data(const TrainOptions& o) {
  Data d;
  if (o.dataset == "fashion-mnist" || o.dataset == "mnist") {
    d.train = nn::load_mnist_dir(o.data_dir, true);
    d.test = nn::load_mnist_dir(o.data_dir, false);
  } else if (o.dataset == "cifar10") {
    d.train = nn::load_cifar10_dir(o.data_dir, true);
    d.test = nn::load_cifar10_dir(o.data_dir, false);
  } else if (o.dataset == "synthetic") {
    const nn::Dims shape = o.model == "resnet50" ? nn::Dims{3, 224, 224}
                           : o.model == "lenet"  ? nn::Dims{1, 28, 28}
                                                 : nn::Dims{3, 32, 32};
    const int classes = o.model == "resnet50" ? 1000 : 10;
    d.train = nn::make_synthetic(static_cast<size_t>(o.synthetic_size), shape, classes, o.seed);
    d.test = nn::make_synthetic(1024, shape, classes, o.seed + 1);
    return d;  // already standard normal
  } else {
    throw std::invalid_argument("unknown data set \"" + o.dataset +
                                "\" (known: fashion-mnist, mnist, cifar10, synthetic)");
  }
  const auto stats = nn::channel_stats(d.train);
  nn::normalise(d.train, stats);
  nn::normalise(d.test, stats);
  return d;
}

std::unique_ptr<Optimizer> make_optimizer(const TrainOptions& o, nn::ParamStore& params) {
  if (o.optimizer == "sgd") {
    return std::make_unique<SGD>(params, SgdOptions{o.lr, o.momentum, o.weight_decay, o.nesterov});
  }
  if (o.optimizer == "adam" || o.optimizer == "adamw") {
    AdamOptions a;
    a.lr = o.lr;
    a.weight_decay = o.weight_decay;
    a.decoupled = o.optimizer == "adamw";
    return std::make_unique<Adam>(params, a);
  }
  throw std::invalid_argument("unknown optimizer \"" + o.optimizer + "\" (known: sgd, adam, adamw)");
}

LrSchedule make_schedule(const TrainOptions& o) {
  LrSchedule s;
  s.base_lr = o.lr;
  s.warmup_epochs = o.warmup_epochs;
  s.kind = LrSchedule::parse_kind(o.schedule);
  s.total_epochs = o.epochs;
  s.milestones = {o.epochs * 0.5, o.epochs * 0.75};
  return o.scale_lr ? s.with_world_size(kolo::size()) : s;
}

// Accuracy and mean loss over the whole test set: each worker evaluates its shard, then the
// sums are added across workers (through the KVStore's workers when there are servers).
std::pair<double, double> evaluate(nn::Model& model, DeviceEngine* engine, const nn::Dataset& test, KvPath* kv) {
  int64_t begin, end;
  nn::eval_shard(static_cast<int64_t>(test.size()), kv ? kv->rank() : kolo::rank(), kv ? kv->workers() : kolo::size(),
                 &begin, &end);
  nn::Tensor x;
  std::vector<int32_t> y;
  nn::Rng unused;
  nn::SoftmaxCrossEntropy loss;
  double sums[3] = {0.0, 0.0, 0.0};  // correct, loss sum, count
  constexpr int64_t kEvalBatch = 500;
  for (int64_t b = begin; b < end; b += kEvalBatch) {
    std::vector<int64_t> idx;
    for (int64_t i = b; i < std::min(end, b + kEvalBatch); ++i) idx.push_back(i);
    nn::gather_batch(test, idx, {}, unused, x, y);
    const auto r = loss.forward(engine ? engine->eval_logits(x) : model.forward(x, false), y.data());
    sums[0] += r.correct;
    sums[1] += r.loss * static_cast<double>(idx.size());
    sums[2] += static_cast<double>(idx.size());
  }
  if (kv) kv->sum_over_workers(sums);
  else allreduce(TensorView::of(sums, Shape{3}), "eval.sums", AllreduceOptions{ReduceOp::kSum});
  return {sums[0] / sums[2], sums[1] / sums[2]};
}

std::string checkpoint_path(const TrainOptions& o) {
  return (std::filesystem::path(o.checkpoint_dir) / "checkpoint.kolo").string();
}

void save_checkpoint(const TrainOptions& o, nn::Model& model, Optimizer& opt, int next_epoch,
                     int64_t step) {
  if (kolo::rank() != 0) return;
  std::filesystem::create_directories(o.checkpoint_dir);
  nn::Checkpoint ck;
  nn::save_model(ck, model);
  save_optimizer(ck, opt);
  ck.put_i64("train.next_epoch", next_epoch);
  ck.put_i64("train.step", step);
  ck.put_i64("train.seed", static_cast<int64_t>(o.seed));
  ck.write_file(checkpoint_path(o));
}

// Rank 0 reads the file and broadcasts its bytes; every rank then parses and validates
// the same bytes, so all ranks accept or refuse it together.
void load_checkpoint(const TrainOptions& o, nn::Model& model, Optimizer& opt, int* next_epoch,
                     int64_t* step) {
  std::vector<uint8_t> bytes;
  int64_t n = 0;
  std::string error;
  if (kolo::rank() == 0) {
    std::ifstream in(checkpoint_path(o), std::ios::binary);
    if (!in) error = checkpoint_path(o) + ": cannot open for --resume";
    else bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    n = error.empty() ? static_cast<int64_t>(bytes.size()) : -1;
  }
  broadcast(TensorView::of(&n, Shape{1}), 0, "resume.size");
  if (n < 0) {
    throw nn::CheckpointError(kolo::rank() == 0 ? error : "rank 0 could not read the checkpoint");
  }
  bytes.resize(static_cast<size_t>(n));
  if (n > 0) broadcast(TensorView::of(bytes.data(), Shape{n}), 0, "resume.bytes");
  const auto ck = nn::Checkpoint::parse(bytes, checkpoint_path(o));
  nn::load_model(ck, model);
  load_optimizer(ck, opt);
  *next_epoch = static_cast<int>(ck.get_i64("train.next_epoch"));
  *step = ck.get_i64("train.step");
}

struct EpochStats {
  double loss = 0.0, accuracy = 0.0, seconds = 0.0, images_per_sec = 0.0;
  // Process CPU time (all threads) of the epoch: a rate that load from other processes
  // disturbs far less than wall time (bench/train_vs_pytorch.sh reports both).
  double cpu_seconds = 0.0, images_per_cpu_sec = 0.0;
  int last_joined = -1;  // --remainder join: what kolo::join() returned
};

struct Run {
  const TrainOptions& o;
  Data data;
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<DistributedOptimizer> opt;
  LrSchedule schedule;
  nn::ShardedSampler sampler;
  nn::Augment augment;
  int64_t step = 0;
  std::unique_ptr<DeviceEngine> engine;  // --device gpu; null on CPU
  KvPath* kv = nullptr;                  // --kv-store other than allreduce
  int rank() const { return kv ? kv->rank() : kolo::rank(); }      // among the workers
  int workers() const { return kv ? kv->workers() : kolo::size(); }
};

// The "mpi" baseline (TrainOptions::gradients): one blocking MPI_Allreduce of every gradient
// after the backward pass, then divide by the number of ranks. Returns its seconds.
double average_gradients_with_mpi(nn::ParamStore& params) {
  const auto t0 = Clock::now();
  std::span<float> g = params.grads();
  if (kolo::size() > 1 && !g.empty()) {
    if (g.size() > static_cast<size_t>(INT_MAX)) throw std::runtime_error("mpi baseline: gradients exceed INT_MAX floats");
    const int rc = MPI_Allreduce(MPI_IN_PLACE, g.data(), static_cast<int>(g.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) throw std::runtime_error("mpi baseline: MPI_Allreduce of the gradients failed");
    const float inv = 1.0f / static_cast<float>(kolo::size());
    for (float& v : g) v *= inv;
  }
  return seconds_since(t0);
}

EpochStats train_epoch(Run& r, int epoch) {
  const bool root = r.rank() == 0;
  r.sampler.set_epoch(epoch);
  nn::Rng aug_rng(stream_seed(r.o.seed, static_cast<uint64_t>(r.rank()), epoch, 1));
  r.model->rng() = nn::Rng(stream_seed(r.o.seed, static_cast<uint64_t>(r.rank()), epoch, 2));
  int64_t batches = r.sampler.batches_per_epoch();
  if (r.o.max_batches > 0) batches = std::min(batches, r.o.max_batches);
  nn::Tensor x;
  std::vector<int32_t> y;
  nn::SoftmaxCrossEntropy loss;
  EpochStats st;
  double win_loss = 0.0, win_correct = 0.0, win_n = 0.0, ep_correct = 0.0, ep_n = 0.0;
  const auto t0 = Clock::now();
  const std::clock_t cpu0 = std::clock();
  auto tw = t0;
  int64_t win_start = 0;
  for (int64_t b = 0; b < batches; ++b) {
    const auto step_start = Clock::now();
    r.opt->set_lr(r.schedule.rate(epoch + static_cast<double>(b) / batches));
    nn::gather_batch(r.data.train, r.sampler.batch(b), r.augment, aug_rng, x, y);
    nn::LossResult res;
    bool updated = false;
    double wait = 0.0;  // seconds the update waited for gradient averaging
    if (r.engine) {
      res = r.engine->train_step(x, y, r.opt->lr(), &updated);
      wait = r.engine->last_wait_seconds();
    } else if (r.kv) {  // the optimizer runs where the store keeps the weights
      res = loss.forward(r.model->forward(x, true), y.data());
      r.model->backward(x, loss.grad(), {});
      wait = r.kv->step(r.model->params());
      r.opt->zero_grad();
      updated = true;
    } else if (r.o.gradients == "mpi") {
      res = loss.forward(r.model->forward(x, true), y.data());
      r.model->backward(x, loss.grad(), {});
      wait = average_gradients_with_mpi(r.opt->inner().params());
      r.opt->inner().step();
      r.opt->zero_grad();
      updated = true;
    } else {
      res = loss.forward(r.model->forward(x, true), y.data());
      r.model->backward(x, loss.grad(), r.opt->hook());
      updated = r.opt->step();
      if (updated) r.opt->zero_grad();
      wait = r.opt->last_wait_seconds();
    }
    ++r.step;
    if (r.o.on_step) {
      r.o.on_step({epoch, b, static_cast<int64_t>(y.size()), seconds_since(step_start),
                   updated ? wait : 0.0, res.loss});
    }
    const auto n = static_cast<double>(y.size());
    win_loss += res.loss * n;
    win_correct += res.correct;
    win_n += n;
    st.loss += res.loss * n;
    ep_correct += res.correct;
    ep_n += n;
    if (root && r.o.verbose && ((b + 1) % r.o.log_interval == 0 || b + 1 == batches)) {
      const double speed = win_n * r.workers() / seconds_since(tw);
      std::printf("Epoch[%d] Batch [%lld-%lld] Speed: %.2f samples/sec loss=%.4f accuracy=%.4f\n",
                  epoch, static_cast<long long>(win_start), static_cast<long long>(b + 1), speed,
                  win_loss / win_n, win_correct / win_n);
      std::fflush(stdout);
      win_loss = win_correct = win_n = 0.0;
      win_start = b + 1;
      tw = Clock::now();
    }
  }
  if (r.o.remainder == "join") {
    // Ranks whose cut of the remainder was empty got here one batch early: they take part
    // in the others' last allreduces until everyone has joined.
    st.last_joined = kolo::join();
    // The ranks that joined early skipped the last update: every rank takes the model,
    // optimizer state and step count of the last rank to join (what join() returns it for).
    broadcast_model(*r.model, st.last_joined);
    broadcast_optimizer_state(r.opt->inner(), st.last_joined);
    int64_t step = r.step;
    broadcast(TensorView::of(&step, Shape{1}), st.last_joined, "remainder.step");
    r.step = step;
    if (root && r.o.verbose) {
      std::printf("Epoch[%d] remainder: %lld batches on this rank (most on any rank: %lld); last rank to join: %d\n",
                  epoch, static_cast<long long>(batches), static_cast<long long>(r.sampler.max_batches_per_epoch()),
                  st.last_joined);
      std::fflush(stdout);
    }
  }
  st.seconds = seconds_since(t0);
  st.loss /= ep_n;
  st.accuracy = ep_correct / ep_n;
  st.images_per_sec = ep_n * r.workers() / st.seconds;
  st.cpu_seconds = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  st.images_per_cpu_sec = st.cpu_seconds > 0.0 ? ep_n / st.cpu_seconds : 0.0;
  return st;
}

nlohmann::json epoch_record(int epoch, const EpochStats& st, std::pair<double, double> test,
                            double lr) {
  nlohmann::json e = {{"epoch", epoch},        {"train_loss", st.loss},
                      {"train_accuracy", st.accuracy}, {"seconds", st.seconds},
                      {"images_per_sec", st.images_per_sec}, {"lr", lr},
                      {"cpu_seconds", st.cpu_seconds},
                      {"images_per_cpu_sec", st.images_per_cpu_sec}};
  if (test.first >= 0) {
    e["test_accuracy"] = test.first;
    e["test_loss"] = test.second;
  }
  return e;
}

// auto: mirror images where that keeps their class (Fashion-MNIST, CIFAR-10: clothes and
// objects, not digits), plus random crops for the ResNets, which over-fit without them.
nn::Augment make_augment(const TrainOptions& o, const nn::Dataset& train) {
  const bool mirrorable = o.dataset == "fashion-mnist" || o.dataset == "cifar10";
  const int pad = std::max(2, train.sample_shape[1] / 8);
  if (o.augment == "off") return {};
  if (o.augment == "flip") return {true, 0};
  if (o.augment == "crop-flip") return {true, pad};
  if (o.augment != "auto") {
    throw std::invalid_argument("unknown --augment \"" + o.augment + "\" (auto, off, flip, crop-flip)");
  }
  if (!mirrorable) return {};
  return {true, o.model == "lenet" ? 0 : pad};
}

Run make_run(const TrainOptions& o, KvPath* kv) {
  if (o.gradients != "kolo" && o.gradients != "mpi")
    throw std::invalid_argument("unknown gradients mode \"" + o.gradients + "\" (known: kolo, mpi)");
  if (o.gradients == "mpi" && (o.device != "cpu" || o.backward_passes_per_step != 1 || o.fp16))
    throw std::invalid_argument(
        "the mpi gradients baseline averages every step's fp32 gradients on the CPU: it takes --device cpu, one "
        "backward pass per step and no fp16 compression");
  if (o.remainder != "drop" && o.remainder != "join")
    throw std::invalid_argument("unknown --remainder \"" + o.remainder + "\" (known: drop, join)");
  if (o.remainder == "join" && (o.device != "cpu" || o.gradients != "kolo" || o.backward_passes_per_step != 1))
    throw std::invalid_argument(
        "--remainder join needs --device cpu, --gradients kolo and one backward pass per step (kolo::join() "
        "takes part in CPU collectives only, and a rank with an extra batch must complete its step)");
  Data data = load_data(o);
  auto model = nn::make_model(o.model, data.train.sample_shape, data.train.num_classes, o.seed);
  // MXNet's num_parts / part_index: the workers of the store (every rank without one).
  nn::ShardedSampler sampler(static_cast<int64_t>(data.train.size()), kv ? kv->rank() : kolo::rank(),
                             kv ? kv->workers() : kolo::size(),
                             o.batch_size, o.seed, true, o.rank_weights, o.remainder == "join");
  DistributedOptions d;
  d.backward_passes_per_step = o.backward_passes_per_step;
  d.fp16_compression = o.fp16;
  d.local_weight = sampler.local_weight();
  d.shared_gradients = kv == nullptr;  // placing them is a collective the servers never join
  auto opt = std::make_unique<DistributedOptimizer>(make_optimizer(o, model->params()), d);
  nn::Augment augment = make_augment(o, data.train);
  std::unique_ptr<DeviceEngine> engine;
  if (o.device == "gpu") {
    EngineOptimizer eo;
    eo.kind = o.optimizer;
    eo.sgd = SgdOptions{o.lr, o.momentum, o.weight_decay, o.nesterov};
    eo.adam.lr = o.lr;
    eo.adam.weight_decay = o.weight_decay;
    eo.adam.decoupled = o.optimizer == "adamw";
    engine = make_gpu_engine(*model, eo, d);
  } else if (o.device != "cpu") {
    throw std::invalid_argument("unknown --device \"" + o.device + "\" (known: cpu, gpu)");
  }
  return Run{o, std::move(data), std::move(model), std::move(opt), make_schedule(o),
             std::move(sampler), augment, 0, std::move(engine), kv};
}

void write_metrics(const TrainOptions& o, const nlohmann::json& m) {
  if (kolo::rank() != 0 || o.metrics_json.empty()) return;
  if (o.metrics_json == "-") {
    std::printf("%s\n", m.dump(2).c_str());
    return;
  }
  std::ofstream out(o.metrics_json);
  out << m.dump(2) << "\n";
  if (!out) throw std::runtime_error(o.metrics_json + ": cannot write metrics");
}

}  // namespace

nlohmann::json run_training(const TrainOptions& o) {
  nn::set_num_threads(o.threads);
  std::unique_ptr<KvPath> kv;
  if (o.kv_lookahead && o.kv_store != "dist_async")
    throw std::invalid_argument("--kv-lookahead takes --kv-store dist_async (the other types have no stale pulls)");
  if (o.kv_store != "allreduce") {
    kv = std::make_unique<KvPath>(o);
    if (kv->is_server()) {  // no data, no model: weights arrive by init
      kv->serve();
      return {{"kv_store", o.kv_store}, {"role", "server"}};
    }
  }
  const bool root = (kv ? kv->rank() : kolo::rank()) == 0 && o.verbose;
  Run r = make_run(o, kv.get());
  int first_epoch = 0;
  if (kv) {
    int64_t steps = r.sampler.batches_per_epoch();
    if (o.max_batches > 0) steps = std::min(steps, o.max_batches);
    kv->start(r.model->params(), steps);
  } else if (o.resume) {
    if (o.checkpoint_dir.empty()) throw std::invalid_argument("--resume needs --checkpoint-dir");
    load_checkpoint(o, *r.model, r.opt->inner(), &first_epoch, &r.step);
    if (root) std::printf("Resumed from %s at epoch %d (step %lld)\n", checkpoint_path(o).c_str(),
                          first_epoch, static_cast<long long>(r.step));
  } else {
    broadcast_model(*r.model, 0);
    broadcast_optimizer_state(r.opt->inner(), 0);
  }
  // The device copy starts from the host model and optimizer every rank now agrees on.
  if (r.engine) r.engine->from_host(*r.model, r.opt->inner());
  if (root) {
    std::printf("kolo-train: %s on %s (%s), %d rank(s) x batch %d (global %d), %zu parameters, %lld batches/epoch\n",
                o.model.c_str(), o.dataset.c_str(), r.engine ? r.engine->device_name().c_str() : "cpu", r.workers(), r.sampler.local_batch_size(),
                r.sampler.global_batch_size(), r.model->params().total_size(),
                static_cast<long long>(r.sampler.batches_per_epoch()));
  }
  if (root && kv)
    std::printf("kolo-train: --kv-store %s, %d worker(s), %d server(s)\n", o.kv_store.c_str(), r.workers(),
                kolo::size() - r.workers());
  nlohmann::json metrics = {{"model", o.model}, {"dataset", o.dataset}, {"ranks", r.workers()},
                            {"kv_store", o.kv_store}, {"servers", kolo::size() - r.workers()},
                            {"batch_size_per_rank", o.batch_size}, {"threads", o.threads},
                            {"device", r.engine ? r.engine->device_name() : "cpu"},
                            {"epochs", nlohmann::json::array()}};
  const auto t0 = Clock::now();
  for (int epoch = first_epoch; epoch < o.epochs; ++epoch) {
    const EpochStats st = train_epoch(r, epoch);
    std::pair<double, double> test{-1.0, 0.0};
    if (o.evaluate) test = evaluate(*r.model, r.engine.get(), r.data.test, kv.get());
    if (root) {
      std::printf("Epoch[%d] Train-loss=%.4f Train-accuracy=%.4f Time=%.1fs Speed=%.1f samples/sec",
                  epoch, st.loss, st.accuracy, st.seconds, st.images_per_sec);
      if (o.evaluate) std::printf(" Test-accuracy=%.4f Test-loss=%.4f", test.first, test.second);
      std::printf("\n");
      std::fflush(stdout);
    }
    metrics["epochs"].push_back(epoch_record(epoch, st, test, r.opt->lr()));
    if (!o.checkpoint_dir.empty()) {
      if (r.engine) r.engine->to_host(*r.model, r.opt->inner());
      save_checkpoint(o, *r.model, r.opt->inner(), epoch + 1, r.step);
    }
  }
  metrics["wall_seconds"] = seconds_since(t0);
  if (!metrics["epochs"].empty() && o.evaluate) {
    metrics["final_test_accuracy"] = metrics["epochs"].back()["test_accuracy"];
  }
  if (kv) kv->close();
  write_metrics(o, metrics);
  return metrics;
}

}  // namespace kolo::train
