// The scratch folder of a test process that writes files, `<tmp>/kolo_nn_test_<pid>`: created on
// first use, removed with everything in it when the process exits normally (Catch's main
// returns, so the function-local static's destructor runs). Every test file of the process shares
// it, so each keeps its files under names of its own. Thread-safe (a static's initialisation).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace kolo::test {

inline std::filesystem::path scratch_dir() {
  struct Dir {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("kolo_nn_test_" + std::to_string(::getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ec;  // never throw from a destructor; a leftover folder is only litter
      std::filesystem::remove_all(path, ec);
    }
  };
  static Dir dir;
  return dir.path;
}

}  // namespace kolo::test
