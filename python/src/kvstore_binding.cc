// kolo._kolo.KVStore: the binding of kolo::KVStore (kolo/kvstore.h) that kolo.torch.kvstore
// wraps. Values travel as (ptr, dtype code, shape, device) members, as for the collectives;
// the C++ store checks them (dtype, device, shape against init) and copies what it keeps, so
// the memory only has to live for the duration of the call.
//
// Every call that may wait for a peer (create, init, push, pull, barrier, run_server, close,
// ...) releases the GIL. A Python updater (set_updater, run_server) is called with the GIL
// re-acquired, on the thread that called push (local, allreduce) or run_server (servers),
// as updater(key, offset, grad_ptr, weight_ptr, size); if it raises, the C++ call that ran it
// fails with a KoloError carrying the Python exception's text.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kolo/kvstore.h"
#include "python/src/binding.h"

namespace py = pybind11;

namespace kolo::python {
namespace {

using Member = std::tuple<uintptr_t, int, std::vector<int64_t>, int>;

std::vector<TensorView> views(const std::vector<Member>& ms) {
  std::vector<TensorView> vs;
  vs.reserve(ms.size());
  for (const Member& x : ms) vs.push_back(view(std::get<0>(x), std::get<1>(x), std::get<2>(x), std::get<3>(x)));
  return vs;
}

// A Python callable as a KVUpdater: takes the GIL, passes raw pointers (the Python layer
// wraps them as tensors without a copy) and turns a Python exception into kolo::Error, so
// that it unwinds through kolo's C++ frames as any other error does.
KVUpdater updater_from(py::object fn) {
  if (fn.is_none()) return {};
  auto held = std::make_shared<py::object>(std::move(fn));
  // The last reference may go away on a thread without the GIL: drop it with the GIL held.
  std::shared_ptr<py::object> guard(held.get(), [held](py::object*) mutable {
    py::gil_scoped_acquire gil;
    held.reset();
  });
  return [guard](int key, int64_t offset, std::span<const float> grad, std::span<float> weight) {
    py::gil_scoped_acquire gil;
    try {
      (*guard)(key, offset, reinterpret_cast<uintptr_t>(grad.data()), reinterpret_cast<uintptr_t>(weight.data()),
               static_cast<int64_t>(weight.size()));
    } catch (py::error_already_set& e) {
      throw Error(Status::invalid_argument("KVStore updater raised for key " + std::to_string(key) + ": " + e.what()));
    }
  };
}

// Holds the store; the Python object owns it. close() is collective, so the destructor's
// fallback close runs without the GIL.
struct PyKVStore {
  std::unique_ptr<KVStore> kv;

  KVStore& get() const {
    if (!kv) throw Error(Status::invalid_argument("KVStore: used after close()"));
    return *kv;
  }
  ~PyKVStore() {
    if (!kv) return;
    py::gil_scoped_release nogil;
    kv.reset();
  }
};

template <class F>
void without_gil(F&& f) {
  py::gil_scoped_release nogil;
  f();
}

// init, push, pull: (keys, members, priority), the call made without the GIL.
template <class Call>
auto keyed(Call call) {
  return [call](PyKVStore& s, const std::vector<int>& keys, const std::vector<Member>& members, int priority) {
    const std::vector<TensorView> vs = views(members);
    without_gil([&] { call(s.get(), keys, vs, priority); });
  };
}

}  // namespace

void bind_kvstore(py::module_& m) {
  py::class_<PyKVStore>(m, "KVStore", "kolo::KVStore (kolo/kvstore.h); use kolo.torch.kvstore")
      .def_static(
          "create",
          [](const std::string& type) {
            auto s = std::make_unique<PyKVStore>();
            without_gil([&] { s->kv = KVStore::create(type); });
            return s;
          },
          py::arg("type"), "Creates a store (collective over every rank for all types but local)")
      .def_property_readonly("type", [](const PyKVStore& s) { return s.get().type(); })
      .def_property_readonly("rank", [](const PyKVStore& s) { return s.get().rank(); })
      .def_property_readonly("num_workers", [](const PyKVStore& s) { return s.get().num_workers(); })
      .def_property_readonly("num_servers", [](const PyKVStore& s) { return s.get().num_servers(); })
      .def_property_readonly("is_server", [](const PyKVStore& s) { return s.get().is_server(); })
      .def_property_readonly("closed", [](const PyKVStore& s) { return !s.kv; })
      .def("init", keyed([](KVStore& kv, const auto& keys, const auto& vs, int) { kv.init(keys, vs); }),
           py::arg("keys"), py::arg("values"), py::arg("priority") = 0)
      .def("push", keyed([](KVStore& kv, const auto& keys, const auto& vs, int p) { kv.push(keys, vs, p); }),
           py::arg("keys"), py::arg("values"), py::arg("priority") = 0)
      .def("pull", keyed([](KVStore& kv, const auto& keys, const auto& vs, int p) { kv.pull(keys, vs, p); }),
           py::arg("keys"), py::arg("outs"), py::arg("priority") = 0)
      .def(
          "set_optimizer",
          [](PyKVStore& s, const std::string& kind, double lr, double momentum, double wd, double rescale_grad,
             double clip_gradient, double beta1, double beta2, double epsilon, bool lookahead,
             const std::string& lr_schedule, int64_t warmup_updates, double warmup_begin_lr, int64_t max_updates,
             double final_lr) {
            KVOptimizer o;
            o.kind = kind;
            o.learning_rate = lr;
            o.momentum = momentum;
            o.wd = wd;
            o.rescale_grad = rescale_grad;
            o.clip_gradient = clip_gradient;
            o.beta1 = beta1;
            o.beta2 = beta2;
            o.epsilon = epsilon;
            o.lookahead = lookahead;
            o.lr_schedule = lr_schedule;
            o.warmup_updates = warmup_updates;
            o.warmup_begin_lr = warmup_begin_lr;
            o.max_updates = max_updates;
            o.final_lr = final_lr;
            without_gil([&] { s.get().set_optimizer(o); });
          },
          py::arg("kind"), py::arg("learning_rate"), py::arg("momentum"), py::arg("wd"), py::arg("rescale_grad"),
          py::arg("clip_gradient"), py::arg("beta1"), py::arg("beta2"), py::arg("epsilon"), py::arg("lookahead") = false,
          py::arg("lr_schedule") = "constant", py::arg("warmup_updates") = 0, py::arg("warmup_begin_lr") = 0.0,
          py::arg("max_updates") = 0, py::arg("final_lr") = 0.0)
      .def(
          "set_updater", [](PyKVStore& s, py::object fn) { s.get().set_updater(updater_from(std::move(fn))); },
          py::arg("updater"), "updater(key, offset, grad_ptr, weight_ptr, size), or None")
      .def(
          "run_server",
          [](PyKVStore& s, py::object fn) {
            KVUpdater u = updater_from(std::move(fn));
            without_gil([&] { s.get().run_server(std::move(u)); });
          },
          py::arg("updater") = py::none())
      .def("barrier", [](PyKVStore& s) { without_gil([&] { s.get().barrier(); }); })
      .def(
          "save_optimizer_states",
          [](PyKVStore& s, const std::string& path) { without_gil([&] { s.get().save_optimizer_states(path); }); },
          py::arg("path"))
      .def(
          "load_optimizer_states",
          [](PyKVStore& s, const std::string& path) { without_gil([&] { s.get().load_optimizer_states(path); }); },
          py::arg("path"))
      .def(
          "sum_over_workers",
          [](PyKVStore& s, std::vector<double> values) {
            without_gil([&] { s.get().sum_over_workers(values); });
            return values;
          },
          py::arg("values"))
      .def("close", [](PyKVStore& s) {
        if (!s.kv) return;
        without_gil([&] {
          s.kv->close();
          s.kv.reset();
        });
      });
}

}  // namespace kolo::python
