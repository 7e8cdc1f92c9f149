// libFuzzer target for the negotiation codec (core/message.cc): any byte string must decode
// to a Status (never crash, hang or read out of bounds), and whatever decodes must encode
// back to exactly the same bytes.
//   cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DKOLO_BUILD_FUZZERS=ON
//   build-fuzz/test/fuzz/kolo-fuzz-codec -runs=1000000 test/fuzz/corpus
#include <cstdint>
#include <cstdlib>

#include "core/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::RequestList requests;
  if (kolo::decode(data, size, &requests).is_ok()) {
    auto again = kolo::encode(requests);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) std::abort();
  }
  kolo::ResponseList responses;
  if (kolo::decode(data, size, &responses).is_ok()) {
    auto again = kolo::encode(responses);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) std::abort();
  }
  return 0;
}
