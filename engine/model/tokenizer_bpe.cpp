// BPE merge loop (see tokenizer_bpe.h). Queue entries are never removed when a neighbour merges;
// instead each entry remembers the byte ranges of its pair and is dropped when popped stale
// (ranges only grow, so any change is detected).
#include "model/tokenizer_bpe.h"

#include <queue>

namespace kvscope {

void BpeMergeTable::add(int32_t left_id, int32_t right_id, int32_t merged_id) {
    table_.try_emplace(key(left_id, right_id), Merge{next_rank_, merged_id});
    ++next_rank_;
}

std::optional<BpeMergeTable::Merge> BpeMergeTable::find(int32_t left_id, int32_t right_id) const {
    auto it = table_.find(key(left_id, right_id));
    if (it == table_.end()) return std::nullopt;
    return it->second;
}

namespace {

struct Candidate {
    double priority;  // lower merges first
    int32_t left;     // symbol index; lower wins ties
    int32_t right;
    int32_t merged_id;
    uint32_t left_begin, right_end;  // staleness check
    uint32_t left_end;
};

struct Later {
    bool operator()(const Candidate& a, const Candidate& b) const {
        if (a.priority != b.priority) return a.priority > b.priority;
        return a.left > b.left;
    }
};

// lookup(left, right) -> optional<pair<priority, merged id>>
template <class Lookup>
void merge_symbols(std::vector<BpeSymbol>& symbols, Lookup lookup) {
    const int32_t n = static_cast<int32_t>(symbols.size());
    if (n < 2) return;
    std::vector<int32_t> prev(n), next(n);
    std::vector<bool> alive(n, true);
    for (int32_t i = 0; i < n; ++i) {
        prev[i] = i - 1;
        next[i] = i + 1 < n ? i + 1 : -1;
    }
    std::priority_queue<Candidate, std::vector<Candidate>, Later> queue;
    auto consider = [&](int32_t l, int32_t r) {
        if (l < 0 || r < 0) return;
        if (auto m = lookup(symbols[l], symbols[r]))
            queue.push({m->first, l, r, m->second, symbols[l].begin, symbols[r].end, symbols[l].end});
    };
    for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        BpeSymbol& l = symbols[c.left];
        const BpeSymbol& r = symbols[c.right];
        if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right || l.begin != c.left_begin ||
            l.end != c.left_end || r.end != c.right_end)
            continue;
        l.id = c.merged_id;
        l.end = r.end;
        alive[c.right] = false;
        next[c.left] = next[c.right];
        if (next[c.right] >= 0) prev[next[c.right]] = c.left;
        consider(prev[c.left], c.left);
        consider(c.left, next[c.left]);
    }
    int32_t out = 0;
    for (int32_t i = 0; i < n; ++i)
        if (alive[i]) symbols[out++] = symbols[i];
    symbols.resize(out);
}

}  // namespace

void bpe_merge_by_rank(std::vector<BpeSymbol>& symbols, const BpeMergeTable& merges) {
    if (merges.empty()) return;
    merge_symbols(symbols, [&](const BpeSymbol& l, const BpeSymbol& r) -> std::optional<std::pair<double, int32_t>> {
        if (l.id < 0 || r.id < 0) return std::nullopt;
        auto m = merges.find(l.id, r.id);
        if (!m) return std::nullopt;
        return std::pair<double, int32_t>{static_cast<double>(m->rank), m->merged_id};
    });
}

void bpe_merge_by_score(std::vector<BpeSymbol>& symbols, std::string_view word,
                        const std::function<std::optional<ScoredPiece>(std::string_view)>& piece_of) {
    merge_symbols(symbols, [&](const BpeSymbol& l, const BpeSymbol& r) -> std::optional<std::pair<double, int32_t>> {
        auto p = piece_of(word.substr(l.begin, r.end - l.begin));
        if (!p) return std::nullopt;
        return std::pair<double, int32_t>{-static_cast<double>(p->score), p->id};
    });
}

}  // namespace kvscope
