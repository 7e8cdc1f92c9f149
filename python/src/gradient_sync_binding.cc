// kolo._kolo.GradientSync — the binding of kolo's framework-neutral training core
// (kolo/gradient_sync.h) that kolo.torch.DistributedOptimizer drives from its gradient hooks.
//
// Gradients are described as (data pointer, dtype code, shape, device) like the collectives
// in module.cc; the Python side keeps the gradient tensors referenced while they are
// submitted. The GIL is released in every call that can submit or wait.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/gradient_sync.h"
#include "python/src/binding.h"

namespace py = pybind11;

namespace kolo::python {

void bind_gradient_sync(py::module_& m) {
  m.attr("COMPRESSION_NONE") = static_cast<int>(Compression::kNone);
  m.attr("COMPRESSION_FP16") = static_cast<int>(Compression::kFp16);
  py::class_<GradientSync>(m, "GradientSync")
      .def(py::init([](int op, double prescale, double postscale, int compression, int passes,
                       bool average_over_passes, const std::string& prefix, int process_set) {
             GradientSyncOptions o;
             o.op = op_from_code(op);
             o.prescale = prescale;
             o.postscale = postscale;
             if (compression != 0 && compression != 1)
               throw Error(Status::invalid_argument("kolo: unknown compression code " + std::to_string(compression)));
             o.compression = static_cast<Compression>(compression);
             o.backward_passes_per_step = passes;
             o.average_over_passes = average_over_passes;
             o.name_prefix = prefix;
             o.process_set = set_from_id(process_set);
             return new GradientSync(std::move(o));
           }),
           py::arg("op"), py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, py::arg("compression") = 0,
           py::arg("backward_passes_per_step") = 1, py::arg("average_over_passes") = false,
           py::arg("name_prefix") = "", py::arg("process_set") = 0)
      .def(
          "register_gradient",
          [](GradientSync& s, const std::string& name, int dtype, const std::vector<int64_t>& shape, int device) {
            return s.register_gradient(name, view(0, dtype, shape, device));
          },
          py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("device") = -1,
          "Adds a gradient (its memory given later, with gradient_ready or set_view); returns its index")
      .def(
          "set_view",
          [](GradientSync& s, int i, uintptr_t ptr, int dtype, const std::vector<int64_t>& shape, int device) {
            s.set_view(i, view(ptr, dtype, shape, device));
          },
          py::arg("index"), py::arg("ptr"), py::arg("dtype"), py::arg("shape"), py::arg("device") = -1)
      .def(
          "gradient_ready",
          [](GradientSync& s, int i, uintptr_t ptr, int dtype, const std::vector<int64_t>& shape, int device) {
            TensorView v = view(ptr, dtype, shape, device);
            py::gil_scoped_release nogil;
            s.gradient_ready(i, v);
          },
          py::arg("index"), py::arg("ptr"), py::arg("dtype"), py::arg("shape"), py::arg("device") = -1,
          "Backward finished writing gradient `index` (at ptr) for this pass; submits on the k-th pass")
      .def("set_external", &GradientSync::set_external, py::arg("index"),
           "The caller reduces gradient `index` itself (sparse gradients): synchronize() skips it")
      .def("submitted", &GradientSync::submitted, py::arg("index"))
      .def("reports", &GradientSync::reports, py::arg("index"))
      .def("num_gradients", &GradientSync::num_gradients)
      .def(
          "synchronize",
          [](GradientSync& s) {
            py::gil_scoped_release nogil;
            s.synchronize();
          },
          "Submits what was not submitted, waits for all, decompresses; raises KoloError on failure")
      .def(
          "abandon",
          [](GradientSync& s) {
            py::gil_scoped_release nogil;
            s.abandon();
          })
      .def("last_wait_seconds", &GradientSync::last_wait_seconds);
}

}  // namespace kolo::python
