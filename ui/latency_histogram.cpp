#include "latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace kvscope::ui {

double niceBinWidth(double raw) {
    if (!(raw > 0) || !std::isfinite(raw)) return 1;
    const double decade = std::pow(10.0, std::floor(std::log10(raw)));
    double best = decade;
    for (double m : {2.0, 5.0, 10.0})
        if (std::abs(std::log(m * decade / raw)) < std::abs(std::log(best / raw))) best = m * decade;
    return best;
}

Histogram makeHistogram(const std::vector<double>& values, int targetBins) {
    Histogram h;
    if (values.empty()) return h;
    const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    // sqrt(n) bins keeps a few samples per bar while the sample is small (numpy's "sqrt" rule).
    const int bins = std::clamp(int(std::ceil(std::sqrt(double(values.size())))), 1, std::max(1, targetBins));
    const double span = *hi - *lo;
    h.binWidth = span > 0 ? niceBinWidth(span / bins) : niceBinWidth(std::max(std::abs(*lo), 1e-9) / 10);
    // A value on a bin edge belongs to the bin above it; the epsilon keeps 0.3 / 0.1 = 2.9999... there.
    auto binOf = [&h](double v, double origin) { return std::floor((v - origin) / h.binWidth + 1e-9); };
    h.start = binOf(*lo, 0) * h.binWidth;
    const size_t count = size_t(binOf(*hi, h.start)) + 1;
    h.counts.assign(count, 0);
    for (double v : values) ++h.counts[std::min(count - 1, size_t(std::max(0.0, binOf(v, h.start))))];
    return h;
}

}  // namespace kvscope::ui
