// The loader of libkvscope-cuda.so (kernels/cuda_loader.h): finds the file, dlopen()s it, checks its ABI
// number and Backend interface hash against this program's, and keeps the process's library and what
// its probe said. A library is never closed, not even one that failed a check (nothing from it ran but
// the checks; unloading CUDA libraries is where crashes live).
#include "cuda_loader.h"

#include "cuda/cuda_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <type_traits>

#include "kvscope_backend_interface.h"  // KVSCOPE_BACKEND_INTERFACE, generated at build time

namespace kvscope {

static_assert(std::is_same_v<CudaLibrary::ProbeFn, decltype(&kvscope_cuda_probe)>);
static_assert(std::is_same_v<CudaLibrary::CreateFn, decltype(&kvscope_cuda_backend_create)>);

namespace {

constexpr const char* kPathVariable = "KVSCOPE_CUDA_LIBRARY";
// From the executable's directory. kernels/CMakeLists.txt builds the library there (build/lib/kvscope,
// beside build/app and build/tests) and installs it there (lib/kvscope beside bin).
constexpr const char* kFromExecutable = "../lib/kvscope/libkvscope-cuda.so";
constexpr size_t kTextSize = 1024;  // the entry points' message buffers

std::string dl_error() {
    const char* e = dlerror();
    return e ? e : "unknown error";
}

// A symbol of `handle` as a function pointer, or null with *error set from dlerror().
template <typename Fn>
Fn find_symbol(void* handle, const char* name, std::string* error) {
    dlerror();
    void* p = dlsym(handle, name);
    if (!p) *error = dl_error();
    return reinterpret_cast<Fn>(p);
}

bool path_from_environment() {
    const char* env = std::getenv(kPathVariable);
    return env && *env;
}

}  // namespace

std::string cuda_library_path(std::string* why_not) {
    if (path_from_environment()) return std::getenv(kPathVariable);
#if KVSCOPE_CUDA_LIBRARY_BUILT
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) {
        if (why_not)
            *why_not = "cannot tell where this executable is (/proc/self/exe: " + ec.message() + "); set " +
                       kPathVariable + " to the CUDA library";
        return "";
    }
    return (exe.parent_path() / kFromExecutable).lexically_normal().string();
#else
    if (why_not)
        *why_not = std::string("this build has no CUDA backend (configured with KVSCOPE_CUDA=OFF or without a CUDA "
                               "toolkit; ") + kPathVariable + " may name a libkvscope-cuda.so of the same version)";
    return "";
#endif
}

CudaLibrary CudaLibrary::open(const std::string& file) {
    CudaLibrary lib;
    // Absolute: dlopen() would search the library path for a name without a slash, not the directory.
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(file, ec);
    const std::string path = ec ? file : absolute.lexically_normal().string();
    lib.path_ = path;
    auto fail = [&](const std::string& error) {
        lib.error_ = error;
        return lib;
    };
    if (!std::filesystem::exists(path, ec)) return fail("CUDA backend library not found: " + path);
    // RTLD_NOW: a missing symbol fails here, with a message, not at the first call. RTLD_LOCAL: nothing
    // of it binds to what is loaded later.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) return fail("cannot load " + path + ": " + dl_error());

    std::string error;
    const auto abi = find_symbol<decltype(&kvscope_cuda_abi_version)>(handle, "kvscope_cuda_abi_version", &error);
    if (!abi) return fail(path + " is not a kvscope CUDA library: " + error);
    const std::string one_build = "; the library and the executables must come from one kvscope build";
    if (abi() != KVSCOPE_CUDA_LIBRARY_ABI)
        return fail(path + " has library ABI " + std::to_string(abi()) + ", this program needs " +
                    std::to_string(KVSCOPE_CUDA_LIBRARY_ABI) + one_build);
    const auto interface = find_symbol<decltype(&kvscope_cuda_backend_interface)>(
        handle, "kvscope_cuda_backend_interface", &error);
    if (!interface) return fail(path + " is not a kvscope CUDA library: " + error);
    const char* theirs = interface();
    if (!theirs || std::strcmp(theirs, KVSCOPE_BACKEND_INTERFACE) != 0)
        return fail(path + " was built from other kvscope headers (Backend interface " + (theirs ? theirs : "?") +
                    ", this program's " + KVSCOPE_BACKEND_INTERFACE + ")" + one_build);
    const auto probe = find_symbol<ProbeFn>(handle, "kvscope_cuda_probe", &error);
    const auto create = probe ? find_symbol<CreateFn>(handle, "kvscope_cuda_backend_create", &error) : nullptr;
    if (!probe || !create) return fail(path + " is not a kvscope CUDA library: " + error);

    lib.handle_ = handle;
    lib.probe_ = probe;
    lib.create_ = create;
    return lib;
}

CudaAvailability CudaLibrary::probe() const {
    if (!loaded()) return {false, error_};
    char text[kTextSize] = {};
    const int count = probe_(text, sizeof text);
    return {count > 0, text};
}

std::unique_ptr<Backend> CudaLibrary::create_backend(int device, std::string* text) const {
    if (!loaded()) {
        if (text) *text = error_;
        return nullptr;
    }
    char buf[kTextSize] = {};
    std::unique_ptr<Backend> backend(create_(device, buf, sizeof buf));
    if (text) *text = buf;
    return backend;
}

const CudaLibrary& cuda_library() {
    static const CudaLibrary lib = [] {
        std::string why_not;
        const std::string path = cuda_library_path(&why_not);
        if (path.empty()) {
            CudaLibrary none;
            none.error_ = why_not;
            return none;
        }
        CudaLibrary opened = CudaLibrary::open(path);
        if (!opened.loaded() && path_from_environment())
            opened.error_ += std::string(" (from ") + kPathVariable + ")";
        return opened;
    }();
    return lib;
}

const CudaAvailability& cuda_availability() {
    static const CudaAvailability availability = cuda_library().probe();
    return availability;
}

std::unique_ptr<Backend> load_cuda_backend(int device, std::string* text) {
    return cuda_library().create_backend(device, text);
}

}  // namespace kvscope
