// The BPE merge loop shared by every tokenizer kind: a word's symbols are merged pair by pair in
// priority order (merge rank for tokenizer.json / GPT-2 merges, piece score for SentencePiece
// vocabs without merges, as llama.cpp's SPM tokenizer does). Linked list + lazy priority queue, so a
// word of n symbols costs O(n log n) however long it is. Stateless: safe from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvscope {

// One symbol of a word: a token id (-1 while the text is not a piece) covering word bytes [begin, end).
struct BpeSymbol {
    int32_t id = -1;
    uint32_t begin = 0;
    uint32_t end = 0;
};

// Rank table of tokenizer.json / GGUF merges: (left id, right id) -> (rank, merged id).
class BpeMergeTable {
public:
    struct Merge {
        int32_t rank;
        int32_t merged_id;
    };
    // Rank is the insertion order; a repeated pair keeps its first (best) rank.
    void add(int32_t left_id, int32_t right_id, int32_t merged_id);
    std::optional<Merge> find(int32_t left_id, int32_t right_id) const;
    bool empty() const { return table_.empty(); }

private:
    static uint64_t key(int32_t l, int32_t r) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
    }
    std::unordered_map<uint64_t, Merge> table_;
    int32_t next_rank_ = 0;
};

// Merges by rank: the adjacent pair with the lowest rank first, the leftmost on ties (HF BPE).
void bpe_merge_by_rank(std::vector<BpeSymbol>& symbols, const BpeMergeTable& merges);

// Merges by score: the adjacent pair whose concatenated text is a piece with the highest score
// first, the leftmost on ties (llama.cpp llm_tokenizer_spm). piece_of(text) gives (id, score).
struct ScoredPiece {
    int32_t id;
    float score;
};
void bpe_merge_by_score(std::vector<BpeSymbol>& symbols, std::string_view word,
                        const std::function<std::optional<ScoredPiece>(std::string_view)>& piece_of);

}  // namespace kvscope
