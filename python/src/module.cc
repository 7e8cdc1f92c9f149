// kolo._kolo — the Python binding of kolo's collectives API (kolo/kolo.h).
//
// Framework-neutral on purpose: it does not link libtorch. The Python layer
// (python/kolo/torch) passes a tensor as (data pointer, dtype code, shape) and keeps the
// tensor object alive in its own handle record until the collective completed, which is
// what kolo's rule "memory must stay valid until the handle completes" asks for.
//
// Errors: every kolo::Error becomes kolo._kolo.KoloError (a RuntimeError) whose message is
// kolo's (tensor name, ranks, values) and whose `code` attribute is the Status code name
// ("mismatch", "invalid_argument", ...).
// The GIL is released while waiting on a handle and while submitting, so the coordinator
// thread and other Python threads run meanwhile.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <tuple>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "python/src/binding.h"

#ifdef KOLO_HAVE_CUDA
#include <nccl.h>
#endif

namespace py = pybind11;

namespace kolo::python {
namespace {

PyObject* g_kolo_error = nullptr;
// KoloValueError: a KoloError that is also a ValueError, raised for Status::kInvalidArgument
// (Horovod raises ValueError for a bad argument: a name in flight, bad alltoall splits).
PyObject* g_kolo_value_error = nullptr;

[[noreturn]] void raise(const Status& s) { throw Error(s); }

// How often a wait looks at Python's pending signals: a Ctrl-C (KeyboardInterrupt) during
// a wait on a collective that never completes is raised within this, not when it ends.
constexpr auto kSignalCheck = std::chrono::milliseconds(100);

// Waits (GIL released) until `h` is done or `seconds` passed (negative: no limit); true when
// done. Between slices of kSignalCheck it runs Python's signal handlers with the GIL held,
// and an exception they raise (KeyboardInterrupt) ends the wait.
bool wait_checking_signals(const Handle& h, double seconds) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    auto slice = kSignalCheck;
    if (seconds >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::duration<double>(seconds) - (std::chrono::steady_clock::now() - start));
      if (left.count() <= 0) return h.done();
      slice = std::min(slice, left);
    }
    bool done = false;
    {
      py::gil_scoped_release nogil;
      done = h.wait_for(slice);
    }
    if (done) return true;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

// A kolo::Handle as Python sees it.
struct PyHandle {
  Handle h;
  bool done() const { return h.done(); }
  void wait() const {
    // Done once wait_checking_signals returns: status() then reads it without blocking, so
    // the GIL is released once per wait, not twice.
    if (!h.done()) wait_checking_signals(h, -1.0);
    throw_if_error(h.status());
  }
  bool wait_for(double seconds) const { return wait_checking_signals(h, std::max(seconds, 0.0)); }
  // Allgather, alltoall, reducescatter (member < 0) or member `member` of a grouped
  // allgather / reducescatter: the result's shape, and a copy of it into `nbytes` bytes at
  // `ptr` (exactly its size). Both block until done (a Ctrl-C ends the wait) and raise if it
  // failed.
  std::vector<int64_t> output_shape(int member) const {
    wait_checking_signals(h, -1.0);
    py::gil_scoped_release nogil;
    return result(member).shape;
  }
  void copy_output(int member, uintptr_t ptr, size_t nbytes) const {
    wait_checking_signals(h, -1.0);
    py::gil_scoped_release nogil;
    const Tensor& t = result(member);
    if (t.bytes.size() != nbytes)
      raise(Status::invalid_argument("kolo: collective output holds " + std::to_string(t.bytes.size()) +
                                     " bytes, the destination " + std::to_string(nbytes)));
    if (nbytes) std::memcpy(reinterpret_cast<void*>(ptr), t.bytes.data(), nbytes);
  }
  // Alltoall: blocks like output_shape.
  std::vector<int64_t> received_splits() const {
    wait_checking_signals(h, -1.0);
    py::gil_scoped_release nogil;
    return h.received_splits();
  }

 private:
  const Tensor& result(int member) const {
    if (member < 0) return h.output();
    const std::vector<Tensor>& all = h.outputs();
    if (member >= static_cast<int>(all.size()))
      raise(Status::invalid_argument("kolo: group member " + std::to_string(member) + " of " +
                                     std::to_string(all.size())));
    return all[static_cast<size_t>(member)];
  }
};

template <class F>
PyHandle submit(F&& f) {
  py::gil_scoped_release nogil;
  return PyHandle{f()};
}

// barrier() and join() wait as Handle.wait() does (Ctrl-C raises KeyboardInterrupt within
// kSignalCheck). An interrupted one stays submitted — kolo cannot take a collective back, and
// peers that reach it complete it — so it is kept here: the next barrier() of the same name
// and set, or the next join(), waits on it again instead of submitting a second. Kept for
// the process's lifetime (never destroyed: no Handle outlives the runtime in a static
// destructor); touched only with the GIL held.
struct PendingBarrier {
  std::string name;
  int process_set;
  Handle h;
  std::unique_ptr<int32_t> token;  // the barrier's one-element allreduce; MPI may write it until done
};
std::vector<PendingBarrier>& pending_barriers() {
  static auto* all = new std::vector<PendingBarrier>();
  return *all;
}
Handle& pending_join() {
  static auto* h = new Handle();
  return *h;
}

// Waits on `h` checking signals, then raises its error if it failed.
void finish(const Handle& h) {
  wait_checking_signals(h, -1.0);
  Status s;
  {
    py::gil_scoped_release nogil;
    s = h.status();
  }
  throw_if_error(s);
}

void barrier_checking_signals(const std::string& name, int process_set) {
  auto& all = pending_barriers();
  const auto same = [&](const PendingBarrier& b) { return b.name == name && b.process_set == process_set; };
  auto it = std::find_if(all.begin(), all.end(), same);
  if (it == all.end()) {
    auto token = std::make_unique<int32_t>(0);
    AllreduceOptions o{ReduceOp::kSum, 1.0, 1.0, set_from_id(process_set)};
    const TensorView v = TensorView::of(token.get(), {1});
    Handle h = submit([&] { return kolo::allreduce_async(v, name, o); }).h;
    all.push_back({name, process_set, h, std::move(token)});
    it = std::prev(all.end());
  }
  const Handle h = it->h;
  wait_checking_signals(h, -1.0);  // KeyboardInterrupt: the entry stays for the next call
  // Done: forget it (found again: another thread may have changed the list meanwhile).
  it = std::find_if(all.begin(), all.end(), same);
  if (it != all.end()) all.erase(it);
  finish(h);
}

int join_checking_signals() {
  Handle& pending = pending_join();
  if (!pending.valid()) {
    py::gil_scoped_release nogil;
    pending = kolo::join_async();
  }
  const Handle h = pending;
  wait_checking_signals(h, -1.0);
  pending = Handle();
  finish(h);
  py::gil_scoped_release nogil;
  return h.last_joined_rank();
}

}  // namespace
}  // namespace kolo::python

PYBIND11_MODULE(_kolo, m) {
  using namespace kolo;
  using namespace kolo::python;
  m.doc() = "kolo's collectives (framework-neutral binding; see kolo.torch for the Horovod API)";

  static py::exception<Error> exc(m, "KoloError", PyExc_RuntimeError);
  g_kolo_error = exc.ptr();
  g_kolo_value_error = PyErr_NewExceptionWithDoc(
      "kolo._kolo.KoloValueError", "A KoloError caused by an invalid argument; also a ValueError, as in Horovod",
      py::make_tuple(py::handle(g_kolo_error), py::handle(PyExc_ValueError)).ptr(), nullptr);
  if (g_kolo_value_error == nullptr) throw py::error_already_set();
  m.attr("KoloValueError") = py::handle(g_kolo_value_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type =
          e.status().code() == Status::Code::kInvalidArgument ? g_kolo_value_error : g_kolo_error;
      py::object err = py::reinterpret_borrow<py::object>(type)(e.what());
      err.attr("code") = status_code_name(e.status().code());
      PyErr_SetObject(type, err.ptr());
    }
  });

  // What this build has, for Horovod's *_built() queries: NCCL's version code (0 without
  // the GPU path), as horovod.torch.nccl_built() returns it.
#ifdef KOLO_HAVE_CUDA
  m.attr("CUDA_BUILT") = true;
  m.attr("NCCL_VERSION") = static_cast<int>(NCCL_VERSION_CODE);
#else
  m.attr("CUDA_BUILT") = false;
  m.attr("NCCL_VERSION") = 0;
#endif

#ifdef KOLO_HAVE_GLOO
  m.attr("GLOO_BUILT") = true;
#else
  m.attr("GLOO_BUILT") = false;
#endif

  m.def("init", [] { kolo::init(); });
  m.def("shutdown", [] {
    py::gil_scoped_release nogil;
    kolo::shutdown();
  });
  m.def("is_initialized", &kolo::is_initialized);
  m.def("start_timeline", &kolo::start_timeline, py::arg("path"), py::arg("mark_cycles") = false);
  m.def("stop_timeline", &kolo::stop_timeline);
  m.def("rank", &kolo::rank);
  m.def("size", &kolo::size);
  m.def("local_rank", &kolo::local_rank);
  m.def("local_size", &kolo::local_size);
  m.def("cross_rank", &kolo::cross_rank);
  m.def("cross_size", &kolo::cross_size);

  // Codes as kolo/types.h numbers them.
  m.attr("DTYPE_UINT8") = static_cast<int>(DType::kUInt8);
  m.attr("DTYPE_INT32") = static_cast<int>(DType::kInt32);
  m.attr("DTYPE_INT64") = static_cast<int>(DType::kInt64);
  m.attr("DTYPE_FLOAT16") = static_cast<int>(DType::kFloat16);
  m.attr("DTYPE_BFLOAT16") = static_cast<int>(DType::kBFloat16);
  m.attr("DTYPE_FLOAT32") = static_cast<int>(DType::kFloat32);
  m.attr("DTYPE_FLOAT64") = static_cast<int>(DType::kFloat64);
  m.attr("DTYPE_INT8") = static_cast<int>(DType::kInt8);
  m.attr("DTYPE_INT16") = static_cast<int>(DType::kInt16);
  m.attr("DTYPE_BOOL") = static_cast<int>(DType::kBool);
  m.attr("OP_SUM") = static_cast<int>(ReduceOp::kSum);
  m.attr("OP_AVERAGE") = static_cast<int>(ReduceOp::kAverage);
  m.attr("OP_MIN") = static_cast<int>(ReduceOp::kMin);
  m.attr("OP_MAX") = static_cast<int>(ReduceOp::kMax);
  m.attr("OP_PRODUCT") = static_cast<int>(ReduceOp::kProduct);

  py::class_<PyHandle>(m, "Handle")
      .def("done", &PyHandle::done, "True once the collective completed (ok or failed); never blocks")
      .def("wait", &PyHandle::wait, "Blocks until done; raises KoloError if it failed")
      .def("wait_for", &PyHandle::wait_for, py::arg("seconds"), "Waits at most `seconds`; True when done")
      .def("output_shape", &PyHandle::output_shape, py::arg("member") = -1,
           "Allgather/alltoall/reducescatter (or a grouped form's member): the result's shape (blocks)")
      .def("copy_output", &PyHandle::copy_output, py::arg("member"), py::arg("ptr"), py::arg("nbytes"),
           "Copies the result (member -1: the only one) to ptr (blocks)")
      .def("received_splits", &PyHandle::received_splits, "Alltoall: rows received from each rank");

  m.def(
      "allreduce_async",
      [](uintptr_t ptr, int dtype, const std::vector<int64_t>& shape, const std::string& name, int op,
         double prescale, double postscale, int device, int process_set) {
        TensorView v = view(ptr, dtype, shape, device);
        AllreduceOptions o{op_from_code(op), prescale, postscale, set_from_id(process_set)};
        return submit([&] { return kolo::allreduce_async(v, name, o); });
      },
      py::arg("ptr"), py::arg("dtype"), py::arg("shape"), py::arg("name"), py::arg("op"),
      py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, py::arg("device") = -1, py::arg("process_set") = 0,
      "In-place allreduce of the memory at ptr");
  m.def(
      "broadcast_async",
      [](uintptr_t ptr, int dtype, const std::vector<int64_t>& shape, int root, const std::string& name,
         int device, int process_set) {
        TensorView v = view(ptr, dtype, shape, device);
        const ProcessSet set = set_from_id(process_set);
        return submit([&] { return kolo::broadcast_async(v, root, name, set); });
      },
      py::arg("ptr"), py::arg("dtype"), py::arg("shape"), py::arg("root"), py::arg("name"),
      py::arg("device") = -1, py::arg("process_set") = 0, "In-place broadcast from root (a job rank)");
  m.def(
      "allgather_async",
      [](uintptr_t ptr, int dtype, const std::vector<int64_t>& shape, const std::string& name, int device,
         int process_set) {
        TensorView v = view(ptr, dtype, shape, device);
        const ProcessSet set = set_from_id(process_set);
        return submit([&] { return kolo::allgather_async(v, name, set); });
      },
      py::arg("ptr"), py::arg("dtype"), py::arg("shape"), py::arg("name"), py::arg("device") = -1,
      py::arg("process_set") = 0,
      "Allgather along the first dimension; the result stays in the handle");
  m.def(
      "alltoall_async",
      [](uintptr_t ptr, int dtype, const std::vector<int64_t>& shape, std::optional<std::vector<int64_t>> splits,
         const std::string& name, int device, int process_set) {
        TensorView v = view(ptr, dtype, shape, device);
        const ProcessSet set = set_from_id(process_set);
        return submit([&] {
          return splits ? kolo::alltoall_async(v, *splits, name, set) : kolo::alltoall_async(v, name, set);
        });
      },
      py::arg("ptr"), py::arg("dtype"), py::arg("shape"), py::arg("splits"), py::arg("name"), py::arg("device") = -1,
      py::arg("process_set") = 0,
      "Alltoall of rows; splits None: even");
  m.def(
      "alltoall_into_async",
      [](uintptr_t ptr, int dtype, const std::vector<int64_t>& shape, uintptr_t out_ptr, int out_dtype,
         const std::vector<int64_t>& out_shape, std::optional<std::vector<int64_t>> splits, const std::string& name,
         int process_set, int device, int out_device) {
        TensorView v = view(ptr, dtype, shape, device);
        TensorView o = view(out_ptr, out_dtype, out_shape, out_device);
        const ProcessSet set = set_from_id(process_set);
        return submit([&] {
          return splits ? kolo::alltoall_async(v, o, *splits, name, set) : kolo::alltoall_async(v, o, name, set);
        });
      },
      py::arg("ptr"), py::arg("dtype"), py::arg("shape"), py::arg("out_ptr"), py::arg("out_dtype"),
      py::arg("out_shape"), py::arg("splits"), py::arg("name"), py::arg("process_set") = 0, py::arg("device") = -1,
      py::arg("out_device") = -1,
      "Alltoall of CPU rows into the memory at out_ptr (its first rows); splits None: even. Tensors off the CPU\n"
      "are refused on every rank (device, out_device: -1 CPU, else the CUDA ordinal)");
  m.def(
      "reducescatter_async",
      [](uintptr_t ptr, int dtype, const std::vector<int64_t>& shape, const std::string& name, int op,
         double prescale, double postscale, int device, int process_set) {
        TensorView v = view(ptr, dtype, shape, device);
        AllreduceOptions o{op_from_code(op), prescale, postscale, set_from_id(process_set)};
        return submit([&] { return kolo::reducescatter_async(v, name, o); });
      },
      py::arg("ptr"), py::arg("dtype"), py::arg("shape"), py::arg("name"), py::arg("op"),
      py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, py::arg("device") = -1, py::arg("process_set") = 0);
  // Grouped forms: members as (ptr, dtype code, shape, device) tuples.
  using Member = std::tuple<uintptr_t, int, std::vector<int64_t>, int>;
  auto views = [](const std::vector<Member>& ms) {
    std::vector<TensorView> vs;
    for (const Member& x : ms) vs.push_back(view(std::get<0>(x), std::get<1>(x), std::get<2>(x), std::get<3>(x)));
    return vs;
  };
  m.def(
      "grouped_allreduce_async",
      [views](const std::vector<Member>& ms, const std::string& name, int op, double prescale, double postscale,
              int process_set) {
        std::vector<TensorView> vs = views(ms);
        AllreduceOptions o{op_from_code(op), prescale, postscale, set_from_id(process_set)};
        return submit([&] { return kolo::grouped_allreduce_async(vs, name, o); });
      },
      py::arg("members"), py::arg("name"), py::arg("op"), py::arg("prescale") = 1.0, py::arg("postscale") = 1.0,
      py::arg("process_set") = 0);
  m.def(
      "grouped_allgather_async",
      [views](const std::vector<Member>& ms, const std::string& name, int process_set) {
        std::vector<TensorView> vs = views(ms);
        const ProcessSet set = set_from_id(process_set);
        return submit([&] { return kolo::grouped_allgather_async(vs, name, set); });
      },
      py::arg("members"), py::arg("name"), py::arg("process_set") = 0);
  m.def(
      "grouped_reducescatter_async",
      [views](const std::vector<Member>& ms, const std::string& name, int op, double prescale, double postscale,
              int process_set) {
        std::vector<TensorView> vs = views(ms);
        AllreduceOptions o{op_from_code(op), prescale, postscale, set_from_id(process_set)};
        return submit([&] { return kolo::grouped_reducescatter_async(vs, name, o); });
      },
      py::arg("members"), py::arg("name"), py::arg("op"), py::arg("prescale") = 1.0, py::arg("postscale") = 1.0,
      py::arg("process_set") = 0);
  m.def("barrier", &barrier_checking_signals, py::arg("name") = "kolo.barrier", py::arg("process_set") = 0,
        "Blocks until every rank of the set has called barrier (kolo::barrier). Ctrl-C raises "
        "KeyboardInterrupt at once; the barrier stays submitted, and the next barrier() of the same "
        "name and set waits on it again");
  m.def("join", &join_checking_signals,
        "Blocks until every rank has joined (kolo::join, kolo/collectives.h); returns the last rank to "
        "join. Ctrl-C raises KeyboardInterrupt at once; the rank stays joined, and the next join() "
        "waits on the same join again");
  bind_process_sets(m);
  bind_kvstore(m);

#ifdef KOLO_HAVE_TRAINING_CORE
  bind_gradient_sync(m);
  m.attr("HAVE_GRADIENT_SYNC") = true;
#else
  m.attr("HAVE_GRADIENT_SYNC") = false;
#endif

}
