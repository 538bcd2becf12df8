#include "natural_order.h"

namespace kvscope::ui {

bool naturalLess(QStringView a, QStringView b) {
    qsizetype i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        if (a[i].isDigit() && b[j].isDigit()) {
            // Compare the two numbers without converting them (ids may hold more digits than a 64-bit int):
            // without leading zeros, the longer run is the larger; of equal length, the first digit that differs.
            while (i < a.size() && a[i] == u'0') ++i;
            while (j < b.size() && b[j] == u'0') ++j;
            qsizetype ei = i, ej = j;
            while (ei < a.size() && a[ei].isDigit()) ++ei;
            while (ej < b.size() && b[ej].isDigit()) ++ej;
            if (ei - i != ej - j) return ei - i < ej - j;
            for (; i < ei; ++i, ++j)
                if (a[i] != b[j]) return a[i] < b[j];
            continue;
        }
        if (a[i] != b[j]) return a[i] < b[j];
        ++i;
        ++j;
    }
    return a.size() - i < b.size() - j;
}

}  // namespace kvscope::ui
