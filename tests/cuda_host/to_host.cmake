# cmake -DIN=kernel.cu -DOUT=kernel.cc -P to_host.cmake: the .cu (or .cuh) file as C++ for
# cuda_host (cuda_host.h): every launch `K<<<config>>>(args)` written as
# `K | ::cuda_host::Config(config) | ::cuda_host::Args(args)`, and every declaration
# `__shared__ T name[...];` (one name, at the start of its line) written as
# `CUDA_HOST_SHARED T name[...]; CUDA_HOST_POISON(name);` (its memory starts as NaN bytes
# in each block), the rest unchanged; a #line keeps the compiler's messages on the .cu
# file's lines. cuda_host.h does not define `__shared__`: a header that was not rewritten
# does not compile. Any other `__shared__` (in a comment, two names in one declaration)
# stops the build.

# Stops unless `pattern` occurs as often in `text` as `done` does in `rewritten`.
function(expect_all text pattern rewritten done what)
  string(REGEX MATCHALL "${pattern}" found "${text}")
  string(REGEX MATCHALL "${done}" made "${rewritten}")
  list(LENGTH found n_found)
  list(LENGTH made n_made)
  if(NOT n_found EQUAL n_made)
    message(FATAL_ERROR "${IN}: ${n_found} ${what}, ${n_made} of them rewritten: to_host.cmake cannot rewrite one")
  endif()
endfunction()

file(READ ${IN} text)
set(original "${text}")
expect_all("${text}" "<<<" "${text}" ">>>\\(" "'<<<'")
string(REPLACE "<<<" " | ::cuda_host::Config(" text "${text}")
string(REPLACE ">>>(" ") | ::cuda_host::Args(" text "${text}")
string(REGEX REPLACE
       "(\n[ \t]*)__shared__([^;,=\n]*[^A-Za-z0-9_\n])([A-Za-z_][A-Za-z0-9_]*)((\\[[^;,=\n]*\\])*);"
       "\\1CUDA_HOST_SHARED\\2\\3\\4; CUDA_HOST_POISON(\\3);" text "${text}")
expect_all("${original}" "__shared__" "${text}" "CUDA_HOST_POISON\\(" "'__shared__'")
file(WRITE ${OUT}.tmp "#include \"cuda_host.h\"\n#line 1 \"${IN}\"\n${text}")
file(RENAME ${OUT}.tmp ${OUT})
