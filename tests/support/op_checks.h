// What the op suites (tests/kernels/test_backend_ops.cpp for every backend, tests/gpu/test_cuda_backend_ops.cpp
// for what only the CUDA device has) share, in the manner of llama.cpp's test-backend-ops: seeded inputs per
// case, buffers moved through the Backend API (so one case body drives host and device memory alike),
// outputs poisoned with NaN before each run, errors as normalized MSE and max abs error.
#pragma once

#include <QtTest>

#include "backend.h"
#include "cpu/quant.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kvscope::test {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

inline std::vector<float> random_floats(std::mt19937_64& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

inline int random_int(std::mt19937_64& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

// FNV-1a: a stable per-case seed from the run's seed and the case's name (the local data tag: every backend
// of a case gets the same inputs).
inline uint64_t case_seed(uint64_t base) {
    const std::string name = std::string(QTest::currentTestFunction()) + "/" +
                             (QTest::currentDataTag() ? QTest::currentDataTag() : "");
    uint64_t h = 1469598103934665603ull ^ base;
    for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    return h;
}

// How far out is from ref: normalized MSE (sum (out-ref)^2 / sum ref^2, as test-backend-ops) and max abs
// error. A non-finite output where the reference is finite (an unwritten, NaN-poisoned element) fails.
struct Diff {
    double nmse = 0;
    double max_abs = 0;
    int64_t worst = -1;      // index of the max abs error or of the first non-finite output
    int64_t non_finite = 0;  // outputs that are NaN/inf
    bool within(double max_abs_tol, double nmse_tol) const {
        return non_finite == 0 && max_abs <= max_abs_tol && nmse <= nmse_tol;
    }
};

inline Diff diff(const float* out, const float* ref, int64_t n) {
    Diff d;
    double se = 0, sr = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (!std::isfinite(out[i])) {
            if (d.non_finite++ == 0) d.worst = i;
            continue;
        }
        const double e = std::fabs(static_cast<double>(out[i]) - ref[i]);
        se += e * e;
        sr += static_cast<double>(ref[i]) * ref[i];
        if (e > d.max_abs && d.non_finite == 0) d.worst = i;
        d.max_abs = std::max(d.max_abs, e);
    }
    d.nmse = sr > 0 ? se / sr : se;
    return d;
}

// `who` names the run ("threads=2", "splits=3").
inline QByteArray describe(const Diff& d, const std::vector<float>& out, const std::vector<float>& ref,
                           const QByteArray& who) {
    QByteArray s = who + " nmse=" + QByteArray::number(d.nmse, 'g', 3) + " max_abs=" + QByteArray::number(d.max_abs, 'g', 3) +
                   " non_finite=" + QByteArray::number(static_cast<qlonglong>(d.non_finite));
    if (d.worst >= 0)
        s += " at [" + QByteArray::number(static_cast<qlonglong>(d.worst)) + "]: out=" +
             QByteArray::number(out[d.worst], 'g', 9) + " ref=" + QByteArray::number(ref[d.worst], 'g', 9);
    return s;
}

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Weights stored in dtype (host memory): each row quantized from F32 with quantize_row.
struct StoredWeights {
    std::vector<uint8_t> bytes;
    WeightView view;
};
inline StoredWeights store(const std::vector<float>& w, DType dtype, int64_t rows, int64_t cols) {
    StoredWeights s;
    const size_t row_bytes = dtype_row_bytes(dtype, cols);
    s.bytes.resize(row_bytes * rows);
    for (int64_t r = 0; r < rows; ++r)
        cpu::quantize_row(dtype, w.data() + r * cols, s.bytes.data() + r * row_bytes, cols);
    s.view = WeightView{s.bytes.data(), dtype, rows, cols};
    return s;
}

// n elements of T in a backend's memory (Backend::allocate), freed on scope exit. For the CPU backend
// that is host memory; for a GPU backend device memory, reached only through upload and download.
template <class T>
class DeviceVector {
public:
    DeviceVector(Backend& b, size_t n) : b_(&b), n_(n), p_(static_cast<T*>(b.allocate(std::max<size_t>(1, n) * sizeof(T)))) {}
    DeviceVector(Backend& b, const std::vector<T>& host) : DeviceVector(b, host.size()) { upload(host); }
    ~DeviceVector() { b_->deallocate(p_); }
    DeviceVector(const DeviceVector&) = delete;
    DeviceVector& operator=(const DeviceVector&) = delete;

    T* data() const { return p_; }
    size_t size() const { return n_; }
    void upload(const std::vector<T>& host) const {
        if (host.size() > n_) qFatal("DeviceVector::upload: %zu elements into %zu", host.size(), n_);
        if (!host.empty()) b_->copy_to_device(p_, host.data(), host.size() * sizeof(T));
    }
    std::vector<T> download() const {
        std::vector<T> host(n_);
        if (n_) b_->copy_to_host(host.data(), p_, n_ * sizeof(T));
        return host;
    }

private:
    Backend* b_;
    size_t n_;
    T* p_;
};

}  // namespace kvscope::test
