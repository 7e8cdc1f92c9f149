# Warnings kolo's own targets compile with. Not applied to third-party code.
function(kolo_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                              -Wold-style-cast -Wcast-align -Woverloaded-virtual
                              -Wimplicit-fallthrough>)
endfunction()
