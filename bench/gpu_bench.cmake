# kolo-bench-gpu (bench/gpu_bench.cc), built when the GPU path is (cmake/KoloCuda.cmake).
# Included from bench/CMakeLists.txt.
if(KOLO_HAVE_CUDA)
  find_package(CUDAToolkit REQUIRED)
  add_executable(kolo-bench-gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_bench.cc)
  target_link_libraries(kolo-bench-gpu PRIVATE kolo kolo_bench_common MPI::MPI_C CUDA::cudart ${KOLO_NCCL_LIBRARY})
  target_include_directories(kolo-bench-gpu PRIVATE ${PROJECT_SOURCE_DIR} ${KOLO_NCCL_INCLUDE})
  target_compile_definitions(kolo-bench-gpu PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  kolo_warnings(kolo-bench-gpu)
endif()
