// GPU-path scenarios that end with one line a CTest regex checks (run under mpirun):
//   no-gpu:   where no rank sees a GPU, a GPU tensor's collective fails on every rank with
//             the plan's reason, promptly (exit 77, skipped, where a GPU is present);
//   bad-knob: KOLO_GPU_OPERATIONS=bogus makes init() refuse, naming the variable.
#include <cstdio>
#include <cstring>
#include <string>

#include "kolo/kolo.h"
#include "test/gpu/gpu_test_util.h"

namespace {

int no_gpu() {
  if (kolo::test::visible_gpus() > 0) {
    std::printf("a GPU is present: skipping the no-GPU scenario\n");
    return kolo::test::kSkipExitCode;
  }
  kolo::init();
  float fake = 0;  // never dereferenced: no executor may touch a GPU tensor here
  kolo::TensorView v = kolo::TensorView::of(&fake, {1});
  v.device = kolo::Device::gpu(0);
  kolo::Handle h = kolo::allreduce_async(v, "gpu.on-cpu-only-job");
  int rc = 1;
  if (!h.wait_for(std::chrono::seconds(30))) {
    std::printf("rank %d: NO-GPU-HUNG\n", kolo::rank());
  } else if (h.status().is_ok()) {
    std::printf("rank %d: NO-GPU-SUCCEEDED (wrong)\n", kolo::rank());
  } else {
    const std::string& m = h.status().message();
    std::printf("rank %d: NO-GPU-FAILED: %s\n", kolo::rank(), m.c_str());
    // The plan's reason, not a generic "no executor": the user learns what is missing.
    rc = m.find("GPU collectives cannot run: rank(s) 0,1 of 2 see no CUDA device") != std::string::npos ? 0 : 1;
  }
  std::fflush(stdout);
  kolo::shutdown();
  return rc;
}

int bad_knob() {
  try {
    kolo::init();
  } catch (const kolo::Error& e) {
    std::printf("init refused: %s\n", e.what());
    return 0;
  }
  std::printf("init accepted a bad KOLO_GPU_OPERATIONS (wrong)\n");
  kolo::shutdown();
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "no-gpu") return no_gpu();
  if (mode == "bad-knob") return bad_knob();
  std::fprintf(stderr, "usage: kolo-test-gpu-scenario no-gpu|bad-knob\n");
  return 2;
}
