// Catch2's main for the fork()-based shared-memory tests (no MPI).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
