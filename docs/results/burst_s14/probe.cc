// h2 probe (not committed): the 1,000 x 4 KB burst split into submit / sync, beside MPI.
#include <mpi.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "kolo/kolo.h"
using C = std::chrono::steady_clock;
static double us(C::time_point a, C::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }
static double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
static double mn(std::vector<double> v) { return *std::min_element(v.begin(), v.end()); }
int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  const int n = 1000, e = 1024, iters = argc > 1 ? atoi(argv[1]) : 200;
  std::vector<float> buf(n * e, 1.f), mbuf(n * e, 1.f);
  std::vector<std::string> names;
  std::vector<kolo::TensorView> views;
  for (int i = 0; i < n; ++i) {
    names.push_back("tiny." + std::to_string(i));
    views.push_back(kolo::TensorView::of(buf.data() + i * e, {e}));
  }
  std::vector<kolo::Handle> h(n);
  std::vector<double> sub, syn, tot, mpi;
  for (int it = 0; it < iters + 10; ++it) {
    std::fill(mbuf.begin(), mbuf.end(), 1.f);
    MPI_Barrier(MPI_COMM_WORLD);
    auto m0 = C::now();
    MPI_Allreduce(MPI_IN_PLACE, mbuf.data(), n * e, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    auto m1 = C::now();
    std::fill(buf.begin(), buf.end(), 1.f);
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = C::now();
    for (int i = 0; i < n; ++i) h[i] = kolo::allreduce_async(views[i], names[i], {kolo::ReduceOp::kAverage});
    auto t1 = C::now();
    for (auto& x : h) kolo::synchronize(x);
    auto t2 = C::now();
    if (buf[0] != 1.f || buf[n * e - 1] != 1.f) { std::fprintf(stderr, "wrong\n"); return 2; }
    if (it < 10) continue;
    sub.push_back(us(t0, t1)); syn.push_back(us(t1, t2)); tot.push_back(us(t0, t2)); mpi.push_back(us(m0, m1));
  }
  if (kolo::rank() == 0)
    std::printf("probe np%d %d iters: submit med %.0f min %.0f us | sync med %.0f min %.0f | total med %.0f min %.0f | MPI 4MB med %.0f min %.0f | ratio med %.2f min %.2f\n",
                kolo::size(), iters, med(sub), mn(sub), med(syn), mn(syn), med(tot), mn(tot), med(mpi), mn(mpi),
                med(tot) / med(mpi), mn(tot) / mn(mpi));
  kolo::shutdown();
}
