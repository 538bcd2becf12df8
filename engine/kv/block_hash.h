// Prefix-cache hashing: the chained hash of one FULL block (vLLM's hash_block_tokens) and the upkeep of
// Request::block_hashes. Pure functions, no global state: the same tokens hash the same in every run.
// Thread affinity: any (no shared state); Request::block_hashes itself belongs to the engine thread.
#pragma once

#include "sched/request.h"

#include <optional>
#include <span>
#include <string_view>

namespace kvscope {

// hash(parent block hash or "none", the block's token ids, extra keys), 64 bits, built from xxHash64's
// round and avalanche with every field length-prefixed (so ("ab", "") never equals ("a", "b")).
// Collision odds for non-adversarial input: with n distinct blocks cached, P(any two collide) ~
// n^2 / 2^65 (about 3e-10 for n = 100,000); one lookup falsely hits with P ~ n / 2^64. It is NOT
// cryptographic: users who can craft prompts could aim for collisions (vLLM offers sha256 for that);
// cache_salt isolates users but does not make the hash collision resistant.
BlockHash hash_block_tokens(std::optional<BlockHash> parent, std::span<const int32_t> tokens,
                            std::string_view extra_keys);

// Extends request.block_hashes over the full blocks of all_token_ids (partial tail blocks get no hash).
// The extra key is cache_salt for the first block only: later blocks inherit it through the chain.
// When the hashes were computed for another block size (or salt), they are recomputed: Request does
// not record the block size, so the first block's hash is re-derived and compared (cost: hashing
// block_size tokens per call).
void update_block_hashes(Request& request, int block_size);
// update_block_hashes without the staleness check: hashes only the full blocks not hashed yet. For a
// caller that knows the existing hashes are for this block size and salt (the KV cache manager, once it
// has checked them for a request that holds blocks: the block size cannot change while blocks are held).
void extend_block_hashes(Request& request, int block_size);

}  // namespace kvscope
