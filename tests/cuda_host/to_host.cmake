# cmake -DIN=kernel.cu -DOUT=kernel.cc -P to_host.cmake: the .cu (or .cuh) file as C++ for
# cuda_host (cuda_host.h): every launch `K<<<config>>>(args)` written as
# `K | ::cuda_host::Config(config) | ::cuda_host::Args(args)`, and every `__shared__`
# declaration followed on its line by `CUDA_HOST_POISON(name);` (its memory starts as
# NaN bytes in each block), the rest unchanged; a #line keeps the compiler's messages on
# the .cu file's lines. `__shared__` may appear in declarations only (not in comments).

# Stops unless `pattern` occurs as often in `text` as `done` does after the rewrite.
function(expect_all text pattern done what)
  string(REGEX MATCHALL "${pattern}" found "${text}")
  string(REGEX MATCHALL "${done}" rewritten "${text}")
  list(LENGTH found n_found)
  list(LENGTH rewritten n_rewritten)
  if(NOT n_found EQUAL n_rewritten)
    message(FATAL_ERROR "${IN}: ${n_found} ${what}, ${n_rewritten} of them rewritten: to_host.cmake cannot rewrite one")
  endif()
endfunction()

file(READ ${IN} text)
expect_all("${text}" "<<<" ">>>\\(" "'<<<'")
string(REPLACE "<<<" " | ::cuda_host::Config(" text "${text}")
string(REPLACE ">>>(" ") | ::cuda_host::Args(" text "${text}")
string(REGEX REPLACE "(__shared__[^;]*[^A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)((\\[[^;]*\\])*);"
       "\\1\\2\\3; CUDA_HOST_POISON(\\2);" text "${text}")
expect_all("${text}" "__shared__" "CUDA_HOST_POISON\\(" "'__shared__' declarations")
file(WRITE ${OUT}.tmp "#include \"cuda_host.h\"\n#line 1 \"${IN}\"\n${text}")
file(RENAME ${OUT}.tmp ${OUT})
