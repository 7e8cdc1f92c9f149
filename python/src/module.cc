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

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "python/src/binding.h"

namespace py = pybind11;

namespace kolo::python {
namespace {

PyObject* g_kolo_error = nullptr;

[[noreturn]] void raise(const Status& s) { throw Error(s); }

// A kolo::Handle as Python sees it.
struct PyHandle {
  Handle h;
  bool done() const { return h.done(); }
  void wait() const {
    Status s;
    {
      py::gil_scoped_release nogil;
      s = h.status();
    }
    throw_if_error(s);
  }
  bool wait_for(double seconds) const {
    py::gil_scoped_release nogil;
    return h.wait_for(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  }
  std::vector<int64_t> gathered_shape() const {
    py::gil_scoped_release nogil;
    return h.gathered().shape;
  }
  // Copies the gathered tensor into `nbytes` bytes at `ptr` (exactly its size).
  void copy_gathered(uintptr_t ptr, size_t nbytes) const {
    py::gil_scoped_release nogil;
    const Tensor& t = h.gathered();
    if (t.bytes.size() != nbytes)
      raise(Status::invalid_argument("kolo: allgather output holds " + std::to_string(t.bytes.size()) +
                                     " bytes, the destination " + std::to_string(nbytes)));
    if (nbytes) std::memcpy(reinterpret_cast<void*>(ptr), t.bytes.data(), nbytes);
  }
};

template <class F>
PyHandle submit(F&& f) {
  py::gil_scoped_release nogil;
  return PyHandle{f()};
}

}  // namespace
}  // namespace kolo::python

PYBIND11_MODULE(_kolo, m) {
  using namespace kolo;
  using namespace kolo::python;
  m.doc() = "kolo's collectives (framework-neutral binding; see kolo.torch for the Horovod API)";

  static py::exception<Error> exc(m, "KoloError", PyExc_RuntimeError);
  g_kolo_error = exc.ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      py::object err = py::reinterpret_borrow<py::object>(g_kolo_error)(e.what());
      err.attr("code") = status_code_name(e.status().code());
      PyErr_SetObject(g_kolo_error, err.ptr());
    }
  });

  m.def("init", [] { kolo::init(); });
  m.def("shutdown", [] {
    py::gil_scoped_release nogil;
    kolo::shutdown();
  });
  m.def("is_initialized", &kolo::is_initialized);
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
  m.attr("OP_SUM") = static_cast<int>(ReduceOp::kSum);
  m.attr("OP_AVERAGE") = static_cast<int>(ReduceOp::kAverage);
  m.attr("OP_MIN") = static_cast<int>(ReduceOp::kMin);
  m.attr("OP_MAX") = static_cast<int>(ReduceOp::kMax);
  m.attr("OP_PRODUCT") = static_cast<int>(ReduceOp::kProduct);

  py::class_<PyHandle>(m, "Handle")
      .def("done", &PyHandle::done, "True once the collective completed (ok or failed); never blocks")
      .def("wait", &PyHandle::wait, "Blocks until done; raises KoloError if it failed")
      .def("wait_for", &PyHandle::wait_for, py::arg("seconds"), "Waits at most `seconds`; True when done")
      .def("gathered_shape", &PyHandle::gathered_shape, "Allgather: the result's shape (blocks)")
      .def("copy_gathered", &PyHandle::copy_gathered, py::arg("ptr"), py::arg("nbytes"),
           "Allgather: copies the result to ptr (blocks)");

  m.def(
      "allreduce_async",
      [](uintptr_t ptr, int dtype, const std::vector<int64_t>& shape, const std::string& name, int op,
         double prescale, double postscale, int device) {
        TensorView v = view(ptr, dtype, shape, device);
        ReduceOp o = op_from_code(op);
        return submit([&] { return kolo::allreduce_async(v, name, o, prescale, postscale); });
      },
      py::arg("ptr"), py::arg("dtype"), py::arg("shape"), py::arg("name"), py::arg("op"),
      py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, py::arg("device") = -1,
      "In-place allreduce of the memory at ptr");
  m.def(
      "broadcast_async",
      [](uintptr_t ptr, int dtype, const std::vector<int64_t>& shape, int root, const std::string& name,
         int device) {
        TensorView v = view(ptr, dtype, shape, device);
        return submit([&] { return kolo::broadcast_async(v, root, name); });
      },
      py::arg("ptr"), py::arg("dtype"), py::arg("shape"), py::arg("root"), py::arg("name"),
      py::arg("device") = -1, "In-place broadcast from root");
  m.def(
      "allgather_async",
      [](uintptr_t ptr, int dtype, const std::vector<int64_t>& shape, const std::string& name, int device) {
        TensorView v = view(ptr, dtype, shape, device);
        return submit([&] { return kolo::allgather_async(v, name); });
      },
      py::arg("ptr"), py::arg("dtype"), py::arg("shape"), py::arg("name"), py::arg("device") = -1,
      "Allgather along the first dimension; the result stays in the handle");
  m.def(
      "barrier",
      [](const std::string& name) {
        py::gil_scoped_release nogil;
        kolo::barrier(name);
      },
      py::arg("name") = "kolo.barrier");

#ifdef KOLO_HAVE_TRAINING_CORE
  bind_gradient_sync(m);
  m.attr("HAVE_GRADIENT_SYNC") = true;
#else
  m.attr("HAVE_GRADIENT_SYNC") = false;
#endif

}
