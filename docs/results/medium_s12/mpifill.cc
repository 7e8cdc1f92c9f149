// h3 s12: MPI_Allreduce (in place, fp32 sum) timed after a barrier, with the buffer rewritten
// just before (as kolo-bench-allreduce does) or not (as kolo-bench-shm-allreduce does); the two
// alternate call by call. Median of the slowest rank, us.
#include <mpi.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int iters = 400;
  for (size_t bytes : {65536ul, 262144ul, 1048576ul}) {
    size_t n = bytes / 4; std::vector<float> buf(n, 1.0f);
    std::vector<double> t[2];
    for (int it = 0; it < iters + 20; ++it) for (int fill = 0; fill < 2; ++fill) {
      if (fill) for (size_t i = 0; i < n; ++i) buf[i] = float(i % 7 + rank);
      MPI_Barrier(MPI_COMM_WORLD);
      auto a = std::chrono::steady_clock::now();
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count(), mx;
      MPI_Allreduce(&us, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (!fill) for (size_t i = 0; i < n; ++i) if (buf[i] > 1e30f) buf[i] = 1.0f;  // keep values finite (outside the timing)
      if (it >= 20) t[fill].push_back(mx);
    }
    for (auto& v : t) std::sort(v.begin(), v.end());
    if (rank == 0) std::printf("%8zu B  no fill %.1f us  fill %.1f us  fill/no-fill %.2f\n", bytes, t[0][iters / 2], t[1][iters / 2], t[1][iters / 2] / t[0][iters / 2]);
  }
  MPI_Finalize();
}
