# Writes OUT, a header defining KVSCOPE_BACKEND_INTERFACE: 16 hex digits of the SHA-256 of FILES, the
# headers whose types cross between an executable and libkvscope-cuda.so (the Backend class and its
# argument types, the library's entry points). Both sides are compiled with it, and the loader
# (kernels/cuda_loader.cpp) refuses a library built from other headers. Run at build time, whenever one
# of FILES changes.
set(all "")
foreach(f IN LISTS FILES)
  file(READ ${f} text)
  string(APPEND all "${text}")
endforeach()
string(SHA256 hash "${all}")
string(SUBSTRING ${hash} 0 16 hash)
file(WRITE ${OUT} "#pragma once\n#define KVSCOPE_BACKEND_INTERFACE \"${hash}\"\n")
