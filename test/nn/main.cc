// The one Catch2 main of the single-process trainer tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
