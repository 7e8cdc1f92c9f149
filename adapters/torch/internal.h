// adapters/torch/internal.h — helpers shared by the two translation units of kolo::torch.
#pragma once

#include <vector>

#include "kolo/handle.h"

namespace kolo::torch {

// Waits for every handle (all of them, even after a failure), clears the list, then throws
// the first failure as kolo::Error.
void wait_all(std::vector<Handle>& handles);

}  // namespace kolo::torch
