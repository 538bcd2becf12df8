// Chained 64-bit block hashes for the prefix cache. No global state (reproducible runs).
#include "kv/block_hash.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

namespace kvscope {
namespace {

// xxHash64 primes.
constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;
// Fixed seed and the stand-in for "no parent" (vLLM draws NONE_HASH at random; we keep runs
// reproducible). A separate has-parent word keeps a real parent equal to kNoParent distinct.
constexpr uint64_t kSeed = 0x6B76736370653031ULL;  // "kvscpe01"
constexpr uint64_t kNoParent = 0x4E4F4E455F484153ULL;

// xxHash64 round: a bijection of acc for each input, so distinct inputs keep distinct states.
uint64_t mix(uint64_t acc, uint64_t input) {
    acc += input * kPrime2;
    acc = std::rotl(acc, 31);
    return acc * kPrime1;
}

uint64_t avalanche(uint64_t h) {
    h ^= h >> 33;
    h *= kPrime2;
    h ^= h >> 29;
    h *= kPrime3;
    h ^= h >> 32;
    return h;
}

}  // namespace

BlockHash hash_block_tokens(std::optional<BlockHash> parent, std::span<const int32_t> tokens,
                            std::string_view extra_keys) {
    uint64_t acc = kSeed + kPrime5;
    acc = mix(acc, parent.has_value());
    acc = mix(acc, parent.value_or(kNoParent));
    acc = mix(acc, tokens.size());
    size_t i = 0;
    for (; i + 2 <= tokens.size(); i += 2)  // two tokens per round: half the dependent multiplies
        acc = mix(acc, uint64_t(uint32_t(tokens[i])) | uint64_t(uint32_t(tokens[i + 1])) << 32);
    if (i < tokens.size()) acc = mix(acc, uint32_t(tokens[i]));
    acc = mix(acc, extra_keys.size());
    for (size_t k = 0; k < extra_keys.size(); k += 8) {
        uint64_t word = 0;
        std::memcpy(&word, extra_keys.data() + k, std::min<size_t>(8, extra_keys.size() - k));
        acc = mix(acc, word);
    }
    return avalanche(acc);
}

namespace {

BlockHash hash_of_block(const Request& request, int index, int block_size,
                        std::optional<BlockHash> parent) {
    std::span<const int32_t> tokens(request.all_token_ids.data() + size_t(index) * block_size,
                                    size_t(block_size));
    return hash_block_tokens(parent, tokens, index == 0 ? std::string_view(request.cache_salt) : "");
}

}  // namespace

void update_block_hashes(Request& request, int block_size) {
    if (block_size <= 0) throw std::invalid_argument("update_block_hashes: block_size must be > 0");
    auto& hashes = request.block_hashes;
    const size_t num_full_blocks = size_t(request.num_tokens() / block_size);
    // Stale hashes (another block size or salt): too many of them, or a different first block.
    if (!hashes.empty() && (hashes.size() > num_full_blocks ||
                            hashes[0] != hash_of_block(request, 0, block_size, std::nullopt)))
        hashes.clear();
    extend_block_hashes(request, block_size);
}

void extend_block_hashes(Request& request, int block_size) {
    auto& hashes = request.block_hashes;
    const size_t num_full_blocks = size_t(request.num_tokens() / block_size);
    // No reserve(num_full_blocks): called as each block fills, an exact reserve would reallocate and copy
    // every hash every time; push_back grows geometrically.
    for (size_t i = hashes.size(); i < num_full_blocks; ++i) {
        std::optional<BlockHash> parent;
        if (i > 0) parent = hashes[i - 1];
        hashes.push_back(hash_of_block(request, int(i), block_size, parent));
    }
}

}  // namespace kvscope
