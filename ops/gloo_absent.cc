// create_gloo_backend in a build without Gloo (KOLO_WITH_GLOO=OFF, or AUTO where libgloo-dev
// was not found): KOLO_BACKEND=gloo is refused with what to install.
#include "ops/gloo_backend.h"

namespace kolo {

Status create_gloo_backend(const Config& /*config*/, std::unique_ptr<Backend>* /*out*/) {
  return Status::invalid_argument(
      "KOLO_BACKEND=gloo: this kolo was built without Gloo (install libgloo-dev and libhiredis-dev, "
      "configure with -DKOLO_WITH_GLOO=ON or AUTO, and rebuild); KOLO_BACKEND=mpi works");
}

}  // namespace kolo
