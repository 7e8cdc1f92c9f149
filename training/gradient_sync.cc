// GradientSync: per-gradient pass counting, submission (with fp16 staging), and the wait at
// the window's end. See kolo/gradient_sync.h for the contract.
#include "kolo/gradient_sync.h"

#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kolo/collectives.h"
#include "kolo/handle.h"
#include "kolo/status.h"

namespace kolo {

namespace {

[[noreturn]] void fail(const std::string& message) { throw Error(Status::invalid_argument(message)); }

bool compressible(const TensorView& v) { return v.dtype == DType::kFloat32 || v.dtype == DType::kFloat64; }

template <class T>
void compress(const T* g, Half* h, int64_t n, double scale) {
  for (int64_t j = 0; j < n; ++j) h[j] = float_to_half(static_cast<float>(g[j] * scale));
}
template <class T>
void decompress(const Half* h, T* g, int64_t n) {
  for (int64_t j = 0; j < n; ++j) g[j] = static_cast<T>(half_to_float(h[j]));
}

}  // namespace

struct GradientSync::Impl {
  struct Entry {
    std::string name;
    TensorView view;
    int reports = 0;
    Handle handle;               // valid from submission to the window's end
    bool compressed = false;     // this window's submission went through `half`
    bool external = false;       // reduced by the client (set_external)
    std::vector<Half> half;      // fp16 staging
  };

  // Constant after construction.
  GradientSyncOptions options;
  double prescale = 1.0;  // options.prescale, times 1/k with average_over_passes

  // Guarded by mu.
  mutable std::mutex mu;
  std::vector<Entry> entries;
  std::unordered_map<std::string, int> by_name;
  double last_wait_seconds = 0.0;

  Entry& at(int index) {
    if (index < 0 || index >= static_cast<int>(entries.size())) {
      fail("GradientSync: no gradient with index " + std::to_string(index) + " (" +
           std::to_string(entries.size()) + " registered)");
    }
    return entries[static_cast<size_t>(index)];
  }
  std::string full_name(const Entry& e) const { return options.name_prefix + e.name; }

  void set_view(Entry& e, const TensorView& view) {
    if (e.handle.valid()) {
      fail("GradientSync: gradient \"" + full_name(e) + "\" is being reduced; its memory cannot change before synchronize()");
    }
    e.view = view;
  }

  // Counts a report of gradient `index` (first taking `view` as its memory, if given) and
  // submits it on the window's k-th.
  void ready(int index, const TensorView* view) {
    Entry& e = at(index);
    const int k = options.backward_passes_per_step;
    if (e.reports >= k) {
      fail("GradientSync: gradient \"" + full_name(e) + "\" reported ready " + std::to_string(e.reports + 1) +
           " times in one window of backward_passes_per_step=" + std::to_string(k) +
           "; call synchronize() (the optimizer's step) after every " + std::to_string(k) +
           " backward passes, or raise backward_passes_per_step");
    }
    if (e.external) fail("GradientSync: gradient \"" + full_name(e) + "\" is reduced by the client (set_external)");
    if (view != nullptr) set_view(e, *view);
    if (++e.reports == k) submit(index);
  }

  void submit(int index) {
    Entry& e = entries[static_cast<size_t>(index)];
    const std::string name = full_name(e);
    if (e.view.data == nullptr && e.view.num_elements() != 0) {
      fail("GradientSync: gradient \"" + name + "\" has no memory (null data) at submission; set its view first");
    }
    const bool compress_it = options.compression == Compression::kFp16 && compressible(e.view);
    if (compress_it && !e.view.device.is_cpu()) {
      fail("GradientSync: fp16 compression of GPU gradient \"" + name + "\" (" + device_name(e.view.device) +
           ") is not supported");
    }
    if (options.before_submit) options.before_submit(index, e.view);
    if (compress_it) {
      const int64_t n = e.view.num_elements();
      e.half.resize(static_cast<size_t>(n));
      if (e.view.dtype == DType::kFloat32) {
        compress(static_cast<const float*>(e.view.data), e.half.data(), n, prescale);
      } else {
        compress(static_cast<const double*>(e.view.data), e.half.data(), n, prescale);
      }
      e.compressed = true;
      e.handle = allreduce_async(TensorView::of(e.half.data(), e.view.shape), name,
                                 AllreduceOptions{options.op, 1.0, options.postscale, options.process_set});
    } else {
      e.compressed = false;
      e.handle = allreduce_async(e.view, name,
                                 AllreduceOptions{options.op, prescale, options.postscale, options.process_set});
    }
  }

  void finish(Entry& e) {
    if (!e.compressed) return;
    const int64_t n = e.view.num_elements();
    if (e.view.dtype == DType::kFloat32) {
      decompress(e.half.data(), static_cast<float*>(e.view.data), n);
    } else {
      decompress(e.half.data(), static_cast<double*>(e.view.data), n);
    }
  }

  void wait_quietly() {
    for (auto& e : entries) {
      if (e.handle.valid()) (void)e.handle.status();
      e.handle = Handle();
      e.reports = 0;
    }
  }
};

GradientSync::GradientSync(GradientSyncOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.backward_passes_per_step < 1) {
    fail("GradientSync: backward_passes_per_step must be >= 1, got " + std::to_string(options.backward_passes_per_step));
  }
  if (!std::isfinite(options.prescale) || !std::isfinite(options.postscale)) {
    fail("GradientSync: scale factors must be finite, got prescale " + std::to_string(options.prescale) +
         ", postscale " + std::to_string(options.postscale));
  }
  impl_->prescale = options.prescale;
  if (options.average_over_passes) impl_->prescale /= options.backward_passes_per_step;
  impl_->options = std::move(options);
}

GradientSync::~GradientSync() { abandon(); }

int GradientSync::register_gradient(const std::string& name, const TensorView& view) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (name.empty()) fail("GradientSync: empty gradient name");
  for (int64_t d : view.shape) {
    if (d < 0) fail("GradientSync: gradient \"" + name + "\" has a negative dimension " + shape_string(view.shape));
  }
  const int index = static_cast<int>(impl_->entries.size());
  if (!impl_->by_name.emplace(name, index).second) {
    fail("GradientSync: gradient \"" + name + "\" registered twice");
  }
  Impl::Entry e;
  e.name = name;
  e.view = view;
  impl_->entries.push_back(std::move(e));
  return index;
}

int GradientSync::index_of(const std::string& name) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->by_name.find(name);
  return it == impl_->by_name.end() ? -1 : it->second;
}

int GradientSync::checked_index(const std::string& name) const {
  const int i = index_of(name);
  if (i < 0) fail("GradientSync: no gradient named \"" + name + "\"");
  return i;
}

int GradientSync::num_gradients() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return static_cast<int>(impl_->entries.size());
}

std::string GradientSync::name(int index) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->at(index).name;
}

void GradientSync::set_view(int index, const TensorView& view) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->set_view(impl_->at(index), view);
}

void GradientSync::gradient_ready(int index) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->ready(index, nullptr);
}

void GradientSync::gradient_ready(int index, const TensorView& view) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->ready(index, &view);
}

void GradientSync::set_external(int index) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl::Entry& e = impl_->at(index);
  if (e.handle.valid()) fail("GradientSync: gradient \"" + impl_->full_name(e) + "\" is being reduced; it cannot become external");
  e.external = true;
}

bool GradientSync::submitted(int index) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->at(index).handle.valid();
}

int GradientSync::reports(int index) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->at(index).reports;
}

void GradientSync::synchronize() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const auto start = std::chrono::steady_clock::now();
  auto& entries = impl_->entries;
  std::optional<Error> first_error;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].handle.valid() || entries[i].external) continue;
    try {
      impl_->submit(static_cast<int>(i));
    } catch (const Error& err) {
      // Keep going: the peers still wait for this rank's other gradients.
      if (!first_error) first_error = err;
    }
  }
  for (auto& e : entries) {
    if (!e.handle.valid()) continue;
    const Status& s = e.handle.status();
    if (s.is_ok()) {
      impl_->finish(e);
    } else if (!first_error) {
      first_error = Error(s);
    }
    e.handle = Handle();
  }
  for (auto& e : entries) e.reports = 0;
  impl_->last_wait_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (first_error) throw *first_error;
}

void GradientSync::abandon() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->wait_quietly();
}

const GradientSyncOptions& GradientSync::options() const { return impl_->options; }

double GradientSync::last_wait_seconds() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->last_wait_seconds;
}

}  // namespace kolo
