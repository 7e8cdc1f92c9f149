// kolo._kolo's process-set functions (kolo/process_set.h): sets travel to and from Python
// as (id, ranks); the collectives take the id (0 = the global set).
#include <pybind11/stl.h>

#include "kolo/process_set.h"
#include "python/src/binding.h"

namespace py = pybind11;

namespace kolo::python {

ProcessSet set_from_id(int id) {
  if (id == 0) return ProcessSet{};
  for (const ProcessSet& s : process_sets())
    if (s.id() == id) return s;
  throw Error(Status::invalid_argument("kolo: process set " + std::to_string(id) +
                                       " is not registered (it was removed, or never added)"));
}

void bind_process_sets(py::module_& m) {
  m.def(
      "add_process_set",
      [](const std::vector<int>& ranks) {
        py::gil_scoped_release nogil;  // collective: waits for every rank
        const ProcessSet s = add_process_set(ranks);
        return std::make_pair(static_cast<int>(s.id()), s.ranks());
      },
      py::arg("ranks"), "Registers a process set (collective over every rank); returns (id, sorted ranks)");
  m.def(
      "remove_process_set",
      [](int id) {
        const ProcessSet s = set_from_id(id);
        py::gil_scoped_release nogil;
        remove_process_set(s);
      },
      py::arg("id"), "Unregisters a process set (collective over every rank)");
  m.def(
      "process_sets",
      [] {
        std::vector<std::pair<int, std::vector<int>>> out;
        for (const ProcessSet& s : process_sets()) out.emplace_back(static_cast<int>(s.id()), s.ranks());
        return out;
      },
      "The registered process sets as (id, ranks), the global set (id 0) first");
}

}  // namespace kolo::python
