// A library that tests/CMakeLists.txt builds where no search path leads, so that a fake CUDA library
// linked to it fails to load as libkvscope-cuda.so does where libcudart.so.13 is missing.
int kvscope_test_absent() { return 0; }
