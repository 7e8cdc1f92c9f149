# Finds Python 3 (headers) and pybind11 for the kolo.torch module (python/). Debian's
# python3-torch belongs to /usr/bin/python3, so that interpreter is preferred over whatever
# python3 comes first on PATH; pass -DPython3_EXECUTABLE=... to choose another.
# Sets KOLO_HAVE_PYTHON.
set(KOLO_HAVE_PYTHON OFF)
if(KOLO_BUILD_PYTHON STREQUAL "OFF")
  return()
endif()
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module)
if(Python3_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import pybind11; print(pybind11.get_cmake_dir())"
                  OUTPUT_VARIABLE _kolo_pybind11_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  find_package(pybind11 CONFIG HINTS ${_kolo_pybind11_dir})
endif()
if(Python3_FOUND AND pybind11_FOUND)
  set(KOLO_HAVE_PYTHON ON)
  add_subdirectory(python)
  message(STATUS "kolo: Python module kolo.torch for ${Python3_EXECUTABLE} (${Python3_VERSION})")
elseif(KOLO_BUILD_PYTHON STREQUAL "ON")
  message(FATAL_ERROR "KOLO_BUILD_PYTHON=ON but Python 3 development files or pybind11 were not found "
                      "(Debian: apt-get install python3-dev python3-pybind11 pybind11-dev)")
else()
  message(STATUS "kolo: Python module off (needs python3-dev and pybind11)")
endif()
