# Decides whether the GPU path is built. AUTO: on when nvcc, NCCL and cuDNN are all found;
# OFF: never; ON: required (configuration fails naming what is missing).
#
# When on, this enables the CUDA language (sm_90 machine code plus PTX for later GPUs),
# defines KOLO_HAVE_CUDA=1 for every target created afterwards, and leaves the found
# libraries in KOLO_NCCL_LIBRARY / KOLO_NCCL_INCLUDE / KOLO_CUDNN_LIBRARY / KOLO_CUDNN_INCLUDE.
# ops/gpu/ adds the GPU sources to libkolo; test/gpu/ and the gpu benchmark follow.
set(KOLO_HAVE_CUDA OFF)
if(NOT KOLO_WITH_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "KOLO_WITH_CUDA=${KOLO_WITH_CUDA}: expected AUTO, ON or OFF")
endif()
if(NOT KOLO_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  set(_kolo_cuda_missing "")
  if(NOT CMAKE_CUDA_COMPILER)
    list(APPEND _kolo_cuda_missing "nvcc (set CMAKE_CUDA_COMPILER or put nvcc on PATH)")
  else()
    # The toolkit that belongs to the nvcc found (unless the user pointed elsewhere).
    if(NOT DEFINED CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT})
      get_filename_component(_kolo_nvcc_dir "${CMAKE_CUDA_COMPILER}" DIRECTORY)
      get_filename_component(CUDAToolkit_ROOT "${_kolo_nvcc_dir}" DIRECTORY)
    endif()
    find_package(CUDAToolkit QUIET)
    if(NOT CUDAToolkit_FOUND)
      list(APPEND _kolo_cuda_missing "CUDA toolkit (libcudart)")
    else()
      # NCCL and cuDNN are often installed beside the toolkit (lib/ or lib64/) or in the
      # system paths; NCCL_ROOT / CUDNN_ROOT point elsewhere.
      set(_kolo_hint_libs ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_ROOT}/lib64)
      find_library(KOLO_NCCL_LIBRARY nccl HINTS $ENV{NCCL_ROOT}/lib ${_kolo_hint_libs})
      find_path(KOLO_NCCL_INCLUDE nccl.h HINTS $ENV{NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS})
      find_library(KOLO_CUDNN_LIBRARY cudnn HINTS $ENV{CUDNN_ROOT}/lib ${_kolo_hint_libs})
      find_path(KOLO_CUDNN_INCLUDE cudnn.h HINTS $ENV{CUDNN_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS})
      foreach(_v KOLO_NCCL_LIBRARY KOLO_NCCL_INCLUDE KOLO_CUDNN_LIBRARY KOLO_CUDNN_INCLUDE)
        if(NOT ${_v} OR NOT EXISTS "${${_v}}")  # also catches a -D path that is wrong
          list(APPEND _kolo_cuda_missing "${_v} (${${_v}})")
        endif()
      endforeach()
    endif()
  endif()
  if(_kolo_cuda_missing STREQUAL "")
    set(KOLO_HAVE_CUDA ON)
  elseif(KOLO_WITH_CUDA STREQUAL "ON")
    list(JOIN _kolo_cuda_missing ", " _kolo_missing_text)
    message(FATAL_ERROR "KOLO_WITH_CUDA=ON but not found: ${_kolo_missing_text}. "
                        "Install them or configure with -DKOLO_WITH_CUDA=OFF (or AUTO).")
  else()
    message(STATUS "kolo: GPU path off; not found: ${_kolo_cuda_missing}")
  endif()
endif()

if(KOLO_HAVE_CUDA)
  # One architecture keeps compile time small: sm_90 machine code (H100/H200) plus its PTX,
  # which the driver JIT-compiles for newer GPUs. Override with -DCMAKE_CUDA_ARCHITECTURES.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
  endif()
  enable_language(CUDA)
  # kolo's headers are C++20. CMake < 3.26 knows no C++20 flag for nvcc (and would refuse
  # CUDA_STANDARD 20 at generate time), though nvcc >= 12 accepts -std=c++20: teach it.
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)
  add_compile_definitions(KOLO_HAVE_CUDA=1)
  message(STATUS "kolo: CUDA ${CUDAToolkit_VERSION}, NCCL ${KOLO_NCCL_LIBRARY}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES}")
endif()
message(STATUS "kolo: GPU path ${KOLO_HAVE_CUDA}")
