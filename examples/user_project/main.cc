// A program outside kolo's tree: sums each rank's id with kolo and checks the answer, then
// averages two "gradients" with kolo::GradientSync (the installed kolo::training library),
// then sums a value over the ranks through kolo::KVStore (kolo::kvstore).
#include <cstdio>
#include <vector>

#include <kolo/gradient_sync.h>
#include <kolo/kolo.h>
#include <kolo/kvstore.h>

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  std::vector<double> v(8, kolo::rank() + 1.0);
  kolo::allreduce(kolo::TensorView::of(v), "user.v", {kolo::ReduceOp::kSum});
  const double want = kolo::size() * (kolo::size() + 1) / 2.0;
  std::printf("user_app rank %d of %d: sum %.0f %s\n", kolo::rank(), kolo::size(), v[0],
              v[0] == want ? "OK" : "WRONG");
  bool ok = v[0] == want;

  std::vector<float> w(16, static_cast<float>(kolo::rank()));
  std::vector<float> b(4, static_cast<float>(kolo::rank()));
  {
    kolo::GradientSync sync;  // average over ranks
    sync.register_gradient("w", kolo::TensorView::of(w));
    sync.register_gradient("b", kolo::TensorView::of(b));
    sync.gradient_ready(0);  // as a backward hook would; "b" goes at synchronize()
    sync.synchronize();
  }
  const float mean = (kolo::size() - 1) / 2.0f;
  const bool sync_ok = w[15] == mean && b[0] == mean;
  std::printf("user_app rank %d: gradient sync mean %.1f %s\n", kolo::rank(), w[15], sync_ok ? "OK" : "WRONG");
  ok = ok && sync_ok;

  {
    auto kv = kolo::KVStore::create("allreduce");  // no optimizer: the store keeps the sum
    std::vector<float> x(3, 0.0f), g(3, 1.0f);
    kv->init(7, kolo::TensorView::of(x));
    kv->pushpull({7}, {kolo::TensorView::of(g)}, {kolo::TensorView::of(x)});
    const bool kv_ok = x[2] == static_cast<float>(kolo::size());
    std::printf("user_app rank %d: kvstore sum %.0f %s\n", kolo::rank(), x[2], kv_ok ? "OK" : "WRONG");
    ok = ok && kv_ok;
  }
  kolo::shutdown();
  return ok ? 0 : 1;
}
