# cmake -DIN=kernel.cu -DOUT=kernel.cc -P to_host.cmake: the .cu (or .cuh) file as C++ for
# cuda_host (cuda_host.h): every launch `K<<<config>>>(args)` written as
# `K | ::cuda_host::Config(config) | ::cuda_host::Args(args)`, and every `__shared__`
# declaration followed on its line by `CUDA_HOST_POISON(name);` (its memory starts as
# NaN bytes in each block), the rest unchanged; a #line keeps the compiler's messages on
# the .cu file's lines. `__shared__` may appear in declarations only (not in comments).
file(READ ${IN} text)
string(REGEX MATCHALL "<<<" opens "${text}")
string(REGEX MATCHALL ">>>\\(" closes "${text}")
list(LENGTH opens n_open)
list(LENGTH closes n_close)
if(NOT n_open EQUAL n_close)
  message(FATAL_ERROR "${IN}: ${n_open} '<<<' but ${n_close} '>>>(': a launch to_host.cmake cannot rewrite")
endif()
string(REPLACE "<<<" " | ::cuda_host::Config(" text "${text}")
string(REPLACE ">>>(" ") | ::cuda_host::Args(" text "${text}")
string(REGEX MATCHALL "__shared__" shared "${text}")
string(REGEX REPLACE "(__shared__[^;]*[^A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)(\\[[^;]*\\])?;"
       "\\1\\2\\3; CUDA_HOST_POISON(\\2);" text "${text}")
string(REGEX MATCHALL "CUDA_HOST_POISON\\(" poisoned "${text}")
list(LENGTH shared n_shared)
list(LENGTH poisoned n_poisoned)
if(NOT n_shared EQUAL n_poisoned)
  message(FATAL_ERROR "${IN}: ${n_shared} '__shared__' but ${n_poisoned} declarations to_host.cmake understood")
endif()
file(WRITE ${OUT}.tmp "#include \"cuda_host.h\"\n#line 1 \"${IN}\"\n${text}")
file(RENAME ${OUT}.tmp ${OUT})
