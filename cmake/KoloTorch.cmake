# LibTorch for the kolo::torch adapter (adapters/torch). Found here, at the top level, so that
# its imported targets are visible to every directory (tests, examples, bench).
# Debian: libtorch-dev, TorchConfig.cmake in /usr/lib/x86_64-linux-gnu/cmake/Torch.
# KOLO_WITH_TORCH: AUTO builds the adapter when LibTorch is found, ON requires it, OFF skips.
set(KOLO_HAVE_TORCH OFF)
if(NOT KOLO_WITH_TORCH STREQUAL "OFF")
  if(KOLO_WITH_TORCH STREQUAL "ON")
    find_package(Torch REQUIRED)
  else()
    find_package(Torch QUIET)
  endif()
  if(Torch_FOUND)
    set(KOLO_HAVE_TORCH ON)
    message(STATUS "kolo: LibTorch ${Torch_VERSION}: building kolo::torch")
  else()
    message(STATUS "kolo: LibTorch not found; kolo::torch is not built (apt-get install libtorch-dev)")
  endif()
endif()
