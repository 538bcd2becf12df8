// Equal-width histogram bins of a latency sample, on "nice" bin widths (1, 2 or 5 times a power of
// ten) so bar edges fall on round milliseconds. Pure functions, any thread; the charts panel bins the
// same per-request values its latency scatter plots.
#pragma once

#include <cstddef>
#include <vector>

namespace kvscope::ui {

struct Histogram {
    double start = 0;      // lower edge of bin 0, a multiple of binWidth
    double binWidth = 1;   // bin i holds values in [start + i * binWidth, start + (i + 1) * binWidth)
    std::vector<int> counts;

    double binCenter(size_t i) const { return start + (double(i) + 0.5) * binWidth; }
};

// The 1, 2 or 5 x 10^k nearest to raw on a log scale (raw > 0): the bin count stays within ~1.6x of
// the one asked for (rounding up only could halve it, 2.01 -> 5).
double niceBinWidth(double raw);

// About targetBins bins (fewer for small samples: ~sqrt(n), at least 1) covering every value;
// empty counts for an empty sample.
Histogram makeHistogram(const std::vector<double>& values, int targetBins = 30);

}  // namespace kvscope::ui
