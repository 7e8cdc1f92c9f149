// Helpers shared by kolo._kolo's source files: codes from Python to kolo's types, and the
// TensorView of memory that Python describes as (pointer, dtype code, shape, device).
// Invalid codes throw kolo::Error (raised in Python as KoloError).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/process_set.h"
#include "kolo/status.h"
#include "kolo/tensor.h"
#include "kolo/types.h"

namespace kolo::python {

inline DType dtype_from_code(int code) {
  if (code < 0 || code >= kNumDTypes)
    throw Error(Status::invalid_argument("kolo: unknown dtype code " + std::to_string(code)));
  return static_cast<DType>(code);
}

inline ReduceOp op_from_code(int code) {
  if (code < 0 || code >= kNumReduceOps)
    throw Error(Status::invalid_argument("kolo: unknown reduce op code " + std::to_string(code)));
  return static_cast<ReduceOp>(code);
}

// device < 0: CPU; else the GPU ordinal.
inline TensorView view(uintptr_t ptr, int dtype, const std::vector<int64_t>& shape, int device) {
  TensorView v;
  v.data = reinterpret_cast<void*>(ptr);
  v.dtype = dtype_from_code(dtype);
  v.shape = shape;
  v.device = device < 0 ? Device::cpu() : Device::gpu(device);
  return v;
}

// The registered process set with id `id` (0: the global set); throws if there is none
// (process_set_binding.cc).
ProcessSet set_from_id(int id);
// kolo._kolo.add_process_set, remove_process_set, process_sets.
void bind_process_sets(pybind11::module_& m);

// kolo._kolo.KVStore (kvstore_binding.cc; kolo/kvstore.h).
void bind_kvstore(pybind11::module_& m);

// kolo._kolo.GradientSync (gradient_sync_binding.cc; built with the training core only).
void bind_gradient_sync(pybind11::module_& m);

}  // namespace kolo::python
