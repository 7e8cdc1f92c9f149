// allreduce_demo — the smallest kolo program: every rank contributes its rank number and
// all receive the average; then a broadcast and a ragged allgather.
//   mpirun -np 2 build/examples/kolo-allreduce-demo
#include <cstdio>
#include <numeric>
#include <vector>

#include "kolo/kolo.h"

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  const int rank = kolo::rank(), size = kolo::size();

  std::vector<float> grad(1000, static_cast<float>(rank));
  kolo::allreduce(kolo::TensorView::of(grad), "grad", {kolo::ReduceOp::kAverage});

  std::vector<int32_t> config(4, rank == 0 ? 42 : -1);
  kolo::broadcast(kolo::TensorView::of(config), /*root=*/0, "config");

  // Rank r contributes r+1 rows of 2 values; everyone receives all rows in rank order.
  std::vector<int64_t> rows(static_cast<size_t>(2 * (rank + 1)), rank);
  kolo::Tensor all = kolo::allgather(kolo::TensorView::of(rows.data(), {rank + 1, 2}), "rows");

  std::printf("rank %d/%d: average %.2f (expected %.2f), broadcast %d, gathered %s rows\n", rank, size, grad[0],
              (size - 1) / 2.0, config[0], kolo::shape_string(all.shape).c_str());
  kolo::shutdown();
  return 0;
}
