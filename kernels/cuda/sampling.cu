// The device sampler: one thread block per row, the host sampler's filters (runner/sampler.cpp) with its
// tie rule, and a deterministic draw.
//
// Order. Tokens are ranked by z = logit / temperature (the host's float division, bit for bit), larger
// first, then by lower index: order_key() packs both into one unique 64-bit key, so "the top k" and "a
// prefix of the sorted row" are the keys at or above a threshold.
//   top-k: the k-th largest key by radix select (8 bits per pass, early exit; integer histograms).
//   min-p: keep e^(z - max) >= min_p (the host's p >= min_p * p_max).
//   top-p: the nucleus is the shortest sorted prefix whose mass reaches top_p x the mass of the top-k set
//   that min-p left (vLLM's nucleus over the survivors).
// Draw. Gumbel-max (argmax of z + Gumbel noise over the candidates) draws from softmax(z) restricted to
// them, in one pass and with no prefix sums. The noise of token i is Philox4x32-10 of the counter
// (i / 4, round, offset) under the key seed: a function of the request alone, not of its batch row.
// top-p by rejection: the nucleus is a prefix of the candidates, so a draw that falls outside it (its
// mass-above already reaches the target) raises the candidate floor past the drawn token and draws
// again. The nucleus holds >= top_p of the candidates' mass, so a round succeeds with probability
// >= top_p, and each rejection also cuts the candidates; after kMaxRounds the top token is taken.
// Every reduction is a fixed-order block reduction or an integer atomic: same inputs, same token.
#include "cuda/sampling.cuh"

#include "cuda/block_reduce.cuh"

namespace kvscope::cuda {

namespace {
constexpr int kThreads = 512;
constexpr int kMaxRounds = 32;

// Philox4x32-10 (Salmon et al., SC'11; the constants of Random123 and cuRAND).
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint2 k) {
    constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        const uint32_t hi0 = __umulhi(kM0, c.x), lo0 = kM0 * c.x;
        const uint32_t hi1 = __umulhi(kM1, c.z), lo1 = kM1 * c.z;
        c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k.x += kW0;
        k.y += kW1;
    }
    return c;
}

// Gumbel noise from 23 random bits: u = (bits + 1/2) / 2^23 lies in [2^-24, 1 - 2^-24], exact in float, so
// neither log sees 0 or 1. (24 bits would round the top value up to 1.0f and give +inf.)
__device__ __forceinline__ float gumbel(uint32_t bits) {
    const float u = (static_cast<float>(bits >> 9) + 0.5f) * 0x1p-23f;
    return -logf(-logf(u));
}

// z of token i; NaN ranks as -inf.
__device__ __forceinline__ float scaled_logit(const float* row, int i, float temperature) {
    const float z = __fdiv_rn(row[i], temperature);
    return isnan(z) ? -INFINITY : z;
}

// Larger z first, then lower index (the host's sort); -0 ranks as +0. Unique within a row; never 0.
__device__ __forceinline__ uint64_t order_key(float z, int i) {
    uint32_t b = __float_as_uint(z == 0.0f ? 0.0f : z);
    b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);  // order-preserving float -> unsigned
    return (static_cast<uint64_t>(b) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(i));
}

// The k-th largest key of the row (1 < k < vocab): the keys >= it are exactly the top k. Each pass
// histograms, by their next 8 bits, the keys that share the digits chosen so far, then descends into the
// bin where the k-th key lies; it stops once that bin holds exactly the keys still needed (at the latest
// on the last digit, keys being unique).
__device__ __forceinline__ uint64_t kth_largest_key(const float* row, int vocab, float temperature, int k) {
    __shared__ unsigned hist[256];
    __shared__ unsigned long long chosen;
    __shared__ int still_needed;
    __shared__ int done;
    uint64_t prefix = 0;  // chosen digits, in place
    int need = k;         // keys still to take among those sharing `prefix`
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += kThreads) hist[b] = 0;
        __syncthreads();
        // Same trip count on every thread, so whole warps reach __match_any_sync.
        for (int base = 0; base < vocab; base += kThreads) {
            const int i = base + static_cast<int>(threadIdx.x);
            int digit = -1;
            if (i < vocab) {
                const uint64_t key = order_key(scaled_logit(row, i, temperature), i);
                if (shift == 56 || (key >> (shift + 8)) == (prefix >> (shift + 8)))
                    digit = static_cast<int>((key >> shift) & 255u);
            }
            // One atomic per distinct digit per warp: the top digits of real logits crowd into a few bins.
            const unsigned peers = __match_any_sync(0xffffffffu, digit);
            if (digit >= 0 && static_cast<int>(threadIdx.x % kWarpSize) == __ffs(peers) - 1)
                atomicAdd(&hist[digit], static_cast<unsigned>(__popc(peers)));
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int b = 255;
            unsigned above = 0;  // sharing keys in the bins above b
            while (above + hist[b] < static_cast<unsigned>(need)) above += hist[b--];  // stops at b >= 0
            still_needed = need - static_cast<int>(above);
            chosen = prefix | (static_cast<uint64_t>(b) << shift);
            done = hist[b] == static_cast<unsigned>(still_needed);
        }
        __syncthreads();
        prefix = chosen;
        need = still_needed;
        const bool finished = done;
        __syncthreads();  // the next pass rewrites the shared slots
        if (finished) break;
    }
    return prefix;
}

}  // namespace

// grid (n), block kThreads.                 logits [n, vocab]; rows [n]; out [n]
static __global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* __restrict__ logits, int vocab, const SamplingRow* __restrict__ rows,
                  int32_t* __restrict__ out) {
    const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
    const SamplingRow p = rows[blockIdx.x];
    const float t = p.temperature;
    if (!(t > 0.0f)) {  // greedy: exactly Backend::argmax
        const ArgMax best = block_argmax_row<kThreads>(row, vocab);
        if (threadIdx.x == 0) out[blockIdx.x] = best.index == INT_MAX ? 0 : best.index;
        return;
    }
    // The top token: always kept, and its z shifts the weights e^(z - m) into (0, 1].
    ArgMax top;
    for (int i = threadIdx.x; i < vocab; i += kThreads) keep_better(top, scaled_logit(row, i, t), i);
    top = block_argmax<kThreads>(top);
    if (p.top_k == 1 || !isfinite(top.value)) {  // one candidate, or nothing to weigh
        if (threadIdx.x == 0) out[blockIdx.x] = top.index == INT_MAX ? 0 : top.index;
        return;
    }
    const float m = top.value;
    // Candidates: keys >= floor_key (the top-k set, later raised by rejections) with e^(z - m) >= min_p.
    uint64_t floor_key = p.top_k > 1 && p.top_k < vocab ? kth_largest_key(row, vocab, t, p.top_k) : 0;
    const bool top_p = p.top_p < 1.0f;
    float target = 0.0f;  // top_p x the candidates' mass (the host normalizes over them)
    if (top_p) {
        float s = 0.0f;
        for (int i = threadIdx.x; i < vocab; i += kThreads) {
            const float z = scaled_logit(row, i, t);
            const float w = expf(z - m);
            if (order_key(z, i) >= floor_key && !(p.min_p > 0.0f && w < p.min_p)) s += w;
        }
        target = p.top_p * block_sum<kThreads>(s);
    }
    const uint2 key = make_uint2(static_cast<uint32_t>(p.seed), static_cast<uint32_t>(p.seed >> 32));
    const uint32_t off_lo = static_cast<uint32_t>(p.offset), off_hi = static_cast<uint32_t>(p.offset >> 32);
    int token = top.index;
    for (int round = 0; round < kMaxRounds; ++round) {
        ArgMax draw;
        for (int g = threadIdx.x; g < (vocab + 3) / 4; g += kThreads) {  // one Philox call serves 4 tokens
            const uint4 r = philox4x32_10(make_uint4(static_cast<uint32_t>(g), static_cast<uint32_t>(round), off_lo, off_hi), key);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int i = 4 * g + e;
                if (i >= vocab) continue;
                const float z = scaled_logit(row, i, t);
                if (order_key(z, i) < floor_key) continue;
                if (p.min_p > 0.0f && expf(z - m) < p.min_p) continue;
                const uint32_t bits = e == 0 ? r.x : e == 1 ? r.y : e == 2 ? r.z : r.w;  // registers, not an array
                keep_better(draw, z + gumbel(bits), i);
            }
        }
        draw = block_argmax<kThreads>(draw);
        if (draw.index == INT_MAX) break;  // no candidate: cannot happen, the top token always is one
        if (!top_p) {
            token = draw.index;
            break;
        }
        // In the nucleus iff the mass ranked above it is still short of the target.
        const uint64_t drawn = order_key(scaled_logit(row, draw.index, t), draw.index);
        float above = 0.0f;
        for (int i = threadIdx.x; i < vocab; i += kThreads) {
            const float z = scaled_logit(row, i, t);
            if (order_key(z, i) > drawn) above += expf(z - m);
        }
        if (block_sum<kThreads>(above) < target) {
            token = draw.index;
            break;
        }
        floor_key = drawn + 1;
    }
    if (threadIdx.x == 0) out[blockIdx.x] = token;
}

void sample(const float* logits, int n, int vocab, const SamplingRow* rows, int32_t* out, cudaStream_t stream) {
    if (n <= 0) return;
    if (vocab <= 0) throw std::invalid_argument("cuda sample: vocab " + std::to_string(vocab) + " must be positive");
    sample_kernel<<<n, kThreads, 0, stream>>>(logits, vocab, rows, out);
    CUDA_CHECK_LAUNCH("sample_kernel");
}

}  // namespace kvscope::cuda
