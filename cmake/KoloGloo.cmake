# Gloo (Debian's libgloo-dev: TCP transport, Redis store over hiredis), the second transport
# (KOLO_BACKEND=gloo, docs/gloo.md). KOLO_WITH_GLOO: AUTO builds it where Gloo and hiredis
# are found, ON requires them, OFF leaves it out (KOLO_BACKEND=gloo is then refused at init).
set(KOLO_WITH_GLOO AUTO CACHE STRING "Gloo transport (KOLO_BACKEND=gloo): AUTO (when libgloo-dev is found), ON or OFF")
set_property(CACHE KOLO_WITH_GLOO PROPERTY STRINGS AUTO ON OFF)
set(KOLO_HAVE_GLOO OFF)
if(NOT KOLO_WITH_GLOO STREQUAL "OFF")
  find_package(Gloo QUIET CONFIG)
  find_path(KOLO_HIREDIS_INCLUDE hiredis/hiredis.h)
  find_library(KOLO_HIREDIS_LIBRARY hiredis)
  if(Gloo_FOUND AND TARGET gloo AND KOLO_HIREDIS_INCLUDE AND KOLO_HIREDIS_LIBRARY)
    # Debian's redis_store.h needs to know the header is hiredis/hiredis.h and that Gloo was
    # built with Redis; check both rather than fail at compile time.
    get_target_property(_kolo_gloo_inc gloo INTERFACE_INCLUDE_DIRECTORIES)
    if(EXISTS "${_kolo_gloo_inc}/gloo/config.h")
      file(STRINGS "${_kolo_gloo_inc}/gloo/config.h" _kolo_gloo_redis REGEX "define GLOO_USE_REDIS 1")
      file(STRINGS "${_kolo_gloo_inc}/gloo/config.h" _kolo_gloo_tcp REGEX "define GLOO_HAVE_TRANSPORT_TCP 1")
    endif()
    if(_kolo_gloo_redis AND _kolo_gloo_tcp)
      set(KOLO_HAVE_GLOO ON)
    endif()
  endif()
  if(NOT KOLO_HAVE_GLOO AND KOLO_WITH_GLOO STREQUAL "ON")
    message(FATAL_ERROR "KOLO_WITH_GLOO=ON but Gloo with the TCP transport and Redis store, or hiredis, "
                        "was not found (apt-get install libgloo-dev libhiredis-dev)")
  endif()
endif()
message(STATUS "kolo: Gloo transport ${KOLO_HAVE_GLOO}")
