// A program outside kolo's tree: sums each rank's id with kolo and checks the answer.
#include <cstdio>
#include <vector>

#include <kolo/kolo.h>

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  std::vector<double> v(8, kolo::rank() + 1.0);
  kolo::allreduce(kolo::TensorView::of(v), "user.v", {kolo::ReduceOp::kSum});
  const double want = kolo::size() * (kolo::size() + 1) / 2.0;
  std::printf("user_app rank %d of %d: sum %.0f %s\n", kolo::rank(), kolo::size(), v[0],
              v[0] == want ? "OK" : "WRONG");
  const bool ok = v[0] == want;
  kolo::shutdown();
  return ok ? 0 : 1;
}
