# cmake -DIN=kernel.cu -DOUT=kernel.cc -P to_host.cmake: the .cu file as C++ for cuda_host
# (cuda_host.h): every launch `K<<<config>>>(args)` written as
# `K | ::cuda_host::Config(config) | ::cuda_host::Args(args)`, the rest unchanged; a #line
# keeps the compiler's messages on the .cu file's lines.
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
file(WRITE ${OUT}.tmp "#include \"cuda_host.h\"\n#line 1 \"${IN}\"\n${text}")
file(RENAME ${OUT}.tmp ${OUT})
