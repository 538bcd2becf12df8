# The packaging label's portable build (cmake -P, run by the portable_build test, a CTest fixture that the
# label's suites require): a KVSCOPE_PORTABLE build of kvscope-cli, kvscope and, where the toolkit is,
# libkvscope-cuda.so, in BUILD_DIR. test_portable_cpu_kernels runs its kvscope-cli under qemu and
# test_package makes the packages from it, so a native build pays for one portable build, not two.
# Of its tests only test_backend_ops is built: it checks every CPU kernel set this CPU can run (the native
# build has one), for test_portable_backend_ops_<set>. Without the install-time build of everything
# (CMAKE_SKIP_INSTALL_ALL_DEPENDENCY): cpack installs only the programs (the tests install nothing).
# kernels/cuda gets the calling build's architectures, so that ccache has it.
# -D: SOURCE_DIR, BUILD_DIR, GENERATOR, CUDA (ON or OFF), CUDA_ARCHITECTURES (comma-separated).
foreach(v SOURCE_DIR BUILD_DIR GENERATOR CUDA CUDA_ARCHITECTURES)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "portable_build.cmake: -D${v} is missing")
  endif()
endforeach()
string(REPLACE "," ";" CUDA_ARCHITECTURES "${CUDA_ARCHITECTURES}")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BUILD_DIR} -G ${GENERATOR}
                        -DCMAKE_BUILD_TYPE=Release -DKVSCOPE_PORTABLE=ON -DKVSCOPE_BUILD_GUI=ON -DBUILD_TESTING=ON
                        -DKVSCOPE_CUDA=${CUDA} "-DKVSCOPE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}"
                        -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the portable build in ${BUILD_DIR} failed (${rc})")
endif()
set(targets kvscope-cli kvscope test_backend_ops)
if(CUDA)
  list(APPEND targets kvscope_cuda_library)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${targets} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building ${targets} in ${BUILD_DIR} failed (${rc})")
endif()
