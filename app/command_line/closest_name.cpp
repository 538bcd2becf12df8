#include "closest_name.h"

#include <algorithm>
#include <cstdlib>

namespace kvscope::command_line {

size_t edit_distance(const std::string& a, const std::string& b) {
    // d[i][j] = distance(a[0, i), b[0, j)), three rows kept: a transposition looks two rows back.
    std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        std::swap(before, previous);
        std::swap(previous, row);
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            row[j] = std::min({previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                row[j] = std::min(row[j], before[j - 2] + 1);
        }
    }
    return row[b.size()];
}

std::optional<std::string> closest_name(const std::string& word, const std::vector<std::string>& candidates) {
    // Leading dashes are the same in every option name: they would make short typos look close.
    auto letters = [](const std::string& s) { return s.substr(std::min(s.find_first_not_of('-'), s.size())); };
    const std::string w = letters(word);
    const size_t limit = std::min(std::max<size_t>(2, w.size() / 4), w.size() / 2);
    std::optional<std::string> best;
    size_t best_distance = limit + 1, best_length_gap = 0;
    for (const std::string& c : candidates) {
        const std::string l = letters(c);
        const size_t d = edit_distance(w, l);
        const size_t gap = l.size() > w.size() ? l.size() - w.size() : w.size() - l.size();
        // On a tie the candidate of the word's length wins: "--modle" is "--model" swapped, not "--mode" + l.
        if (d < best_distance || (d == best_distance && gap < best_length_gap)) {
            best = c;
            best_distance = d;
            best_length_gap = gap;
        }
    }
    return best;
}

}  // namespace kvscope::command_line
