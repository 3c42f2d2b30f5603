// The merge kernels of both levels of BPE: an encoder's piece of byte tokens and a superword run of word tokens.
// At each step the adjacent pair with the smallest value merges, the leftmost on ties; a pair's value is
// rank << 32 | result id, kNoMerge where it does not merge. The kernels are templates over that lookup
// (value(left, right)), so the encoder's pair table and a superword level's supermerges are each inlined into one
// copy of the same loop. bpe_core/model/merges.py (merge_ids) is the reference of both.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "encoder.h"  // MergeStats, kPollPops and the stop check of long loops
#include "tables.h"   // kNoMerge, kIdMask

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

namespace bpe {

// ------------------------------------------------------------------------------------------ short pieces
//
// Leftmost smallest value, merged until none merges, in place: ids[0, n) with values[i] the value of ids[i],
// ids[i + 1] (n - 1 of them, filled by the caller, 2 <= n). Returns the new length. Every step is branch-free but
// for the loops' ends: the argmin is a min-reduction (cmov, or vector min + compare mask + tzcnt), and both
// neighbours' values are looked up on every step (where the merged pair is at an end, the missing neighbour's
// lookup repeats the other one and its result is dropped by a select). Measured (callgrind, 1 MB of the bench's
// text, the first encode call, AVX2 tier): mispredicts per new piece 38.7 -> 20.7 (cl100k) and 39.6 -> 20.9
// (o200k), instructions +2% (51.0 / 52.4 Ir/B); `if (values[i] < best)` had been 31 of the 39. Of what remains, ~10
// per new piece are the pair table's probe loop (tables.h U64Map::find). The first n - 1 values and every value
// written are < 2^63 (a rank << 32 | id, or kNoMerge = 2^62): the AVX2 tier compares them as signed.

// One step's bookkeeping after the pair at i merged (ids[i] holds the result): the tiers shift ids[i + 2, m + 1) and
// values[i + 1, m) down by one themselves, then this gives the pairs left and right of i their new values.
template <class Value>
inline void merge_scan_neighbours(uint32_t* ids, uint64_t* values, size_t i, size_t m, const Value& value) {
    // m: pairs left after the merge. l: the left pair (i - 1), or i itself at the left end; r: the right pair
    // (i), or l at the right end. Where the two coincide the same slot is looked up twice (a cache hit).
    // Arithmetic, not ?: (GCC made branches of both: 27 K mispredicts on 1 MB).
    const size_t l = i - (i > 0);
    const size_t r = l + size_t((i > 0) & (i < m));
    const uint64_t vl = value(ids[l], ids[l + 1]);
    const uint64_t vr = value(ids[r], ids[r + 1]);
    values[l] = vl;
    const uint64_t keep = uint64_t(0) - uint64_t(i < m);
    values[i] = (vr & keep) | (kNoMerge & ~keep);  // i == m: the slot past the last pair, kept at kNoMerge
}

// Scalar, for any CPU (and the superword level, whose values hold exactly n - 1 entries).
template <class Value>
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
size_t merge_scan(uint32_t* ids, uint64_t* values, size_t n, const Value& value) {
    size_t m = n - 1;  // number of pairs
    while (m > 0) {
        size_t best_i = 0;
        uint64_t best = values[0];
        for (size_t i = 1; i < m; ++i) {
            const uint64_t v = values[i];
            const bool less = v < best;
            best = less ? v : best;  // cmov, not a branch on the data
            best_i = less ? i : best_i;
        }
        if (best == kNoMerge) break;
        const size_t i = best_i;
        ids[i] = static_cast<uint32_t>(best & kIdMask);
        // Shifted in place by a loop: a few elements, where memmove was a library call each (two per merge); GCC
        // turns such loops back into memmove calls unless told not to (-ftree-loop-distribute-patterns): 11
        // library calls per new piece of 20 MB.
        for (size_t k = i + 1; k < m; ++k) {
            ids[k] = ids[k + 1];
            values[k - 1] = values[k];
        }
        --m;
        merge_scan_neighbours(ids, values, i, m, value);
    }
    return m + 1;
}

// The instruction tiers of the short-piece kernel, chosen once by CPU detection (merge_tier_best), or set by a test
// (set_merge_tier) so that every tier is checked on any machine that has it.
enum class MergeTier : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

inline const char* merge_tier_name(MergeTier t) {
    return t == MergeTier::kAvx512 ? "avx512" : t == MergeTier::kAvx2 ? "avx2" : "scalar";
}

inline MergeTier merge_tier_best() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    static const MergeTier best =
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("bmi")
            ? MergeTier::kAvx512
        : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") ? MergeTier::kAvx2
                                                                            : MergeTier::kScalar;
    return best;
#else
    return MergeTier::kScalar;
#endif
}

inline std::atomic<int> g_merge_tier{-1};  // -1: not chosen yet

// "auto" (the best this CPU has), "scalar", "avx2" or "avx512": false (and nothing changed) for another name or a
// tier above the best.
inline bool set_merge_tier(const char* name);

// The tier in use: the CPU's best, or BEAM_BPE_MERGE_TIER where it names one this CPU has (to count a tier under
// callgrind, or run a suite in it), or what set_merge_tier chose.
inline MergeTier merge_tier() {
    int t = g_merge_tier.load(std::memory_order_relaxed);
    if (__builtin_expect(t < 0, 0)) {
        const char* env = std::getenv("BEAM_BPE_MERGE_TIER");
        if (!env || !set_merge_tier(env)) set_merge_tier("auto");
        t = g_merge_tier.load(std::memory_order_relaxed);
    }
    return static_cast<MergeTier>(t);
}

inline bool set_merge_tier(const char* name) {
    const MergeTier best = merge_tier_best();
    int t = -1;
    for (MergeTier c : {MergeTier::kScalar, MergeTier::kAvx2, MergeTier::kAvx512})
        if (std::strcmp(name, merge_tier_name(c)) == 0) t = static_cast<int>(c);
    if (std::strcmp(name, "auto") == 0) t = static_cast<int>(best);
    if (t < 0 || t > static_cast<int>(best)) return false;
    g_merge_tier.store(t, std::memory_order_relaxed);
    return true;
}

// Entries the vector tiers need in ids and in values for a piece of up to kScanLimit ids: each pads both arrays past
// the piece (kNoMerge values, zero ids) and reads whole vectors.
constexpr size_t kScanRoom = kScanLimit + 16;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BPE_MERGE_AVX2 __attribute__((target("avx2,bmi,bmi2,popcnt")))
#define BPE_MERGE_AVX512 __attribute__((target("avx512f,avx512vl,avx2,bmi,bmi2,popcnt")))

BPE_MERGE_AVX2 inline __m256i vmin_avx2(__m256i a, __m256i b) {
    return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b));
}
BPE_MERGE_AVX2 inline __m256i at_avx2(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// AVX2: 4 values a vector (signed compares: every value is < 2^63), 8 ids a vector. Each step reduces the
// ceil(m / 4) vectors of values to their minimum, finds its first lane by compare masks and tzcnt, and shifts the
// values above it and the ids above it down by one with a blend of each vector and the one a lane further on
// (a fixed number of vectors a step, not m - i elements: no loop end that depends on where the pair was). kNV > 0:
// always kNV vectors of values (unrolled; for pieces of 4 * kNV - 6 to 4 * kNV + 1 ids, so that the padding covers
// them), 0: as many as the pairs left need.
template <size_t kNV, class Value>
BPE_MERGE_AVX2 size_t merge_scan_avx2_nv(uint32_t* ids, uint64_t* values, size_t n, const Value& value) {
    size_t m = n - 1;
    const __m256i none = _mm256_set1_epi64x(static_cast<long long>(kNoMerge));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(values + m), none);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(values + m + 4), none);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(ids + n), _mm256_setzero_si256());
    const __m256i lane64 = _mm256_setr_epi64x(0, 1, 2, 3);
    const __m256i lane32 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    while (m > 0) {
        const size_t nv = kNV ? kNV : (m + 3) / 4;
        __m256i lo = at_avx2(values);
        for (size_t j = 1; j < nv; ++j) lo = vmin_avx2(lo, at_avx2(values + 4 * j));
        lo = vmin_avx2(lo, _mm256_permute4x64_epi64(lo, 0x4E));
        lo = vmin_avx2(lo, _mm256_shuffle_epi32(lo, 0x4E));  // every lane holds the minimum
        const uint64_t best = static_cast<uint64_t>(_mm_cvtsi128_si64(_mm256_castsi256_si128(lo)));
        if (best == kNoMerge) break;
        uint64_t bits = 0;
        for (size_t j = 0; j < nv; ++j)
            bits |= uint64_t(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(at_avx2(values + 4 * j), lo))))
                    << (4 * j);
        const size_t i = static_cast<size_t>(__builtin_ctzll(bits));
        ids[i] = static_cast<uint32_t>(best & kIdMask);
        const __m256i below_v = _mm256_set1_epi64x(static_cast<long long>(i) - 1);
        for (size_t j = 0; j < nv; ++j) {  // values[k] = values[k + 1] for k >= i
            __m256i* p = reinterpret_cast<__m256i*>(values + 4 * j);
            const __m256i up = _mm256_cmpgt_epi64(_mm256_add_epi64(lane64, _mm256_set1_epi64x(4 * j)), below_v);
            _mm256_storeu_si256(p, _mm256_blendv_epi8(at_avx2(p), at_avx2(values + 4 * j + 1), up));
        }
        const __m256i below_i = _mm256_set1_epi32(static_cast<int>(i));
        for (size_t j = 0, ni = kNV ? (4 * kNV + 7) / 8 : (m + 7) / 8; j < ni; ++j) {  // ids[k] = ids[k + 1], k > i
            __m256i* p = reinterpret_cast<__m256i*>(ids + 8 * j);
            const __m256i up = _mm256_cmpgt_epi32(_mm256_add_epi32(lane32, _mm256_set1_epi32(8 * int(j))), below_i);
            _mm256_storeu_si256(p, _mm256_blendv_epi8(at_avx2(p), at_avx2(ids + 8 * j + 1), up));
        }
        --m;
        merge_scan_neighbours(ids, values, i, m, value);
    }
    return m + 1;
}

// The masked forms with every lane set: the unmasked ones pass GCC 12's _mm512_undefined_epi32(), which
// -Wmaybe-uninitialized reports at -O2 (the sanitizer build).
BPE_MERGE_AVX512 inline __m512i min_avx512(__m512i a, __m512i b) { return _mm512_mask_min_epu64(a, 0xFF, a, b); }

// AVX-512: the same with 8 values and 16 ids a vector, unsigned minima and k-masks (kNV: 1 up to 9 ids, 2 up to
// 17, 0 any).
template <size_t kNV, class Value>
BPE_MERGE_AVX512 size_t merge_scan_avx512_nv(uint32_t* ids, uint64_t* values, size_t n, const Value& value) {
    size_t m = n - 1;
    const __m512i none = _mm512_set1_epi64(static_cast<long long>(kNoMerge));
    _mm512_storeu_si512(values + m, none);
    _mm512_storeu_si512(values + m + 8, none);
    _mm512_storeu_si512(ids + n, _mm512_setzero_si512());
    while (m > 0) {
        const size_t nv = kNV ? kNV : (m + 7) / 8;
        __m512i lo = _mm512_loadu_si512(values);
        for (size_t j = 1; j < nv; ++j) lo = min_avx512(lo, _mm512_loadu_si512(values + 8 * j));
        lo = min_avx512(lo, _mm512_mask_shuffle_i64x2(lo, 0xFF, lo, lo, 0x4E));  // the halves swapped
        lo = min_avx512(lo, _mm512_mask_shuffle_i64x2(lo, 0xFF, lo, lo, 0xB1));  // the quarters
        lo = min_avx512(lo, _mm512_mask_shuffle_epi32(lo, 0xFFFF, lo, _MM_PERM_BADC));  // every lane: the minimum
        const __m128i low = _mm512_mask_extracti32x4_epi32(_mm_setzero_si128(), 0xF, lo, 0);
        const uint64_t best = static_cast<uint64_t>(_mm_cvtsi128_si64(low));
        if (best == kNoMerge) break;
        const __m512i b = lo;
        uint64_t bits = 0;
        for (size_t j = 0; j < nv; ++j)
            bits |= uint64_t(_mm512_cmpeq_epu64_mask(_mm512_loadu_si512(values + 8 * j), b)) << (8 * j);
        const size_t i = static_cast<size_t>(__builtin_ctzll(bits));
        ids[i] = static_cast<uint32_t>(best & kIdMask);
        const uint64_t up_v = ~uint64_t(0) << i;  // lanes k >= i take values[k + 1]
        for (size_t j = 0; j < nv; ++j)
            _mm512_storeu_si512(values + 8 * j,
                                _mm512_mask_blend_epi64(static_cast<__mmask8>(up_v >> (8 * j)),
                                                        _mm512_loadu_si512(values + 8 * j),
                                                        _mm512_loadu_si512(values + 8 * j + 1)));
        const uint64_t up_i = ~uint64_t(0) << (i + 1);  // lanes k > i take ids[k + 1]
        for (size_t j = 0, ni = kNV ? (8 * kNV + 15) / 16 : (m + 15) / 16; j < ni; ++j)
            _mm512_storeu_si512(ids + 16 * j,
                                _mm512_mask_blend_epi32(static_cast<__mmask16>(up_i >> (16 * j)),
                                                        _mm512_loadu_si512(ids + 16 * j),
                                                        _mm512_loadu_si512(ids + 16 * j + 1)));
        --m;
        merge_scan_neighbours(ids, values, i, m, value);
    }
    return m + 1;
}

// The same with the values in registers for the whole piece (kNV vectors, pieces of at most 4 * kNV + 1 ids; AVX-512
// 8 * kNV + 1) and the ids shifted by scalar moves: no vector load that straddles an earlier store (a failed store
// forwarding on every step, which the memory versions above pay natively and callgrind does not show).
template <size_t kNV, class Value>
BPE_MERGE_AVX2 size_t merge_scan_avx2_reg(uint32_t* ids, uint64_t* values, size_t n, const Value& value) {
    size_t m = n - 1;
    const __m256i none = _mm256_set1_epi64x(static_cast<long long>(kNoMerge));
    for (size_t k = m; k < 4 * kNV; ++k) values[k] = kNoMerge;
    __m256i v[kNV];
    for (size_t j = 0; j < kNV; ++j) v[j] = at_avx2(values + 4 * j);
    const __m256i lane64 = _mm256_setr_epi64x(0, 1, 2, 3);
    while (m > 0) {
        __m256i lo = v[0];
        for (size_t j = 1; j < kNV; ++j) lo = vmin_avx2(lo, v[j]);
        lo = vmin_avx2(lo, _mm256_permute4x64_epi64(lo, 0x4E));
        lo = vmin_avx2(lo, _mm256_shuffle_epi32(lo, 0x4E));
        const uint64_t best = static_cast<uint64_t>(_mm_cvtsi128_si64(_mm256_castsi256_si128(lo)));
        if (best == kNoMerge) break;
        uint64_t bits = 0;
        for (size_t j = 0; j < kNV; ++j)
            bits |= uint64_t(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(v[j], lo)))) << (4 * j);
        const size_t i = static_cast<size_t>(__builtin_ctzll(bits));
        ids[i] = static_cast<uint32_t>(best & kIdMask);
        for (size_t k = i + 1; k < m; ++k) ids[k] = ids[k + 1];
        const __m256i below = _mm256_set1_epi64x(static_cast<long long>(i) - 1);
        for (size_t j = 0; j < kNV; ++j) {  // lanes k >= i take lane k + 1 (the next vector's first lane last)
            const __m256i next = j + 1 < kNV ? v[j + 1] : none;
            const __m256i over = _mm256_blend_epi32(_mm256_permute4x64_epi64(v[j], 0x39),
                                                    _mm256_permute4x64_epi64(next, 0x00), 0xC0);
            const __m256i up = _mm256_cmpgt_epi64(_mm256_add_epi64(lane64, _mm256_set1_epi64x(4 * j)), below);
            v[j] = _mm256_blendv_epi8(v[j], over, up);
        }
        --m;
        const size_t l = i - (i > 0);
        const size_t r = l + size_t((i > 0) & (i < m));
        const uint64_t vl = value(ids[l], ids[l + 1]);
        const uint64_t vr = value(ids[r], ids[r + 1]);
        const uint64_t keep = uint64_t(0) - uint64_t(i < m);
        const __m256i at_l = _mm256_set1_epi64x(static_cast<long long>(l));
        const __m256i at_i = _mm256_set1_epi64x(static_cast<long long>(i));
        const __m256i new_l = _mm256_set1_epi64x(static_cast<long long>(vl));
        const __m256i new_i = _mm256_set1_epi64x(static_cast<long long>((vr & keep) | (kNoMerge & ~keep)));
        for (size_t j = 0; j < kNV; ++j) {
            const __m256i k = _mm256_add_epi64(lane64, _mm256_set1_epi64x(4 * j));
            v[j] = _mm256_blendv_epi8(v[j], new_l, _mm256_cmpeq_epi64(k, at_l));
            v[j] = _mm256_blendv_epi8(v[j], new_i, _mm256_cmpeq_epi64(k, at_i));
        }
    }
    return m + 1;
}

template <size_t kNV, class Value>
BPE_MERGE_AVX512 size_t merge_scan_avx512_reg(uint32_t* ids, uint64_t* values, size_t n, const Value& value) {
    size_t m = n - 1;
    const __m512i none = _mm512_set1_epi64(static_cast<long long>(kNoMerge));
    for (size_t k = m; k < 8 * kNV; ++k) values[k] = kNoMerge;
    __m512i v[kNV];
    for (size_t j = 0; j < kNV; ++j) v[j] = _mm512_loadu_si512(values + 8 * j);
    while (m > 0) {
        __m512i lo = v[0];
        for (size_t j = 1; j < kNV; ++j) lo = min_avx512(lo, v[j]);
        lo = min_avx512(lo, _mm512_mask_shuffle_i64x2(lo, 0xFF, lo, lo, 0x4E));
        lo = min_avx512(lo, _mm512_mask_shuffle_i64x2(lo, 0xFF, lo, lo, 0xB1));
        lo = min_avx512(lo, _mm512_mask_shuffle_epi32(lo, 0xFFFF, lo, _MM_PERM_BADC));
        const __m128i low = _mm512_mask_extracti32x4_epi32(_mm_setzero_si128(), 0xF, lo, 0);
        const uint64_t best = static_cast<uint64_t>(_mm_cvtsi128_si64(low));
        if (best == kNoMerge) break;
        uint64_t bits = 0;
        for (size_t j = 0; j < kNV; ++j) bits |= uint64_t(_mm512_cmpeq_epu64_mask(v[j], lo)) << (8 * j);
        const size_t i = static_cast<size_t>(__builtin_ctzll(bits));
        ids[i] = static_cast<uint32_t>(best & kIdMask);
        for (size_t k = i + 1; k < m; ++k) ids[k] = ids[k + 1];
        const uint64_t up = ~uint64_t(0) << i;
        for (size_t j = 0; j < kNV; ++j) {
            const __m512i next = j + 1 < kNV ? v[j + 1] : none;
            const __m512i over = _mm512_mask_alignr_epi64(v[j], 0xFF, next, v[j], 1);
            v[j] = _mm512_mask_blend_epi64(static_cast<__mmask8>(up >> (8 * j)), v[j], over);
        }
        --m;
        const size_t l = i - (i > 0);
        const size_t r = l + size_t((i > 0) & (i < m));
        const uint64_t vl = value(ids[l], ids[l + 1]);
        const uint64_t vr = value(ids[r], ids[r + 1]);
        const uint64_t keep = uint64_t(0) - uint64_t(i < m);
        const __m512i new_l = _mm512_set1_epi64(static_cast<long long>(vl));
        const __m512i new_i = _mm512_set1_epi64(static_cast<long long>((vr & keep) | (kNoMerge & ~keep)));
        for (size_t j = 0; j < kNV; ++j) {
            v[j] = _mm512_mask_mov_epi64(v[j], static_cast<__mmask8>((uint64_t(1) << l) >> (8 * j)), new_l);
            v[j] = _mm512_mask_mov_epi64(v[j], static_cast<__mmask8>((uint64_t(1) << i) >> (8 * j)), new_i);
        }
    }
    return m + 1;
}

// By the piece's length: most new pieces have 5-12 bytes (cl100k, 1 MB of the bench's text: 78% of 13,923 at most 10).
template <class Value>
BPE_MERGE_AVX2 size_t merge_scan_avx2(uint32_t* ids, uint64_t* values, size_t n, const Value& value) {
    if (n <= 5) return merge_scan_avx2_reg<1>(ids, values, n, value);
    if (n <= 9) return merge_scan_avx2_reg<2>(ids, values, n, value);
    if (n <= 17) return merge_scan_avx2_reg<4>(ids, values, n, value);
    return merge_scan_avx2_nv<0>(ids, values, n, value);
}

template <class Value>
BPE_MERGE_AVX512 size_t merge_scan_avx512(uint32_t* ids, uint64_t* values, size_t n, const Value& value) {
    if (n <= 9) return merge_scan_avx512_reg<1>(ids, values, n, value);
    if (n <= 17) return merge_scan_avx512_reg<2>(ids, values, n, value);
    return merge_scan_avx512_nv<0>(ids, values, n, value);
}
#endif

// The short-piece kernel in this process's tier: ids and values hold kScanRoom entries (the vector tiers pad them).
template <class Value>
size_t merge_scan_tiered(uint32_t* ids, uint64_t* values, size_t n, const Value& value) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    switch (merge_tier()) {
        case MergeTier::kAvx512:
            return merge_scan_avx512(ids, values, n, value);
        case MergeTier::kAvx2:
            return merge_scan_avx2(ids, values, n, value);
        default:
            break;
    }
#endif
    return merge_scan(ids, values, n, value);
}

// Long pieces: a heap of (value, position) with lazy invalidation over a doubly linked list, O(n log n) (a 1 MiB
// piece without spaces, or a 1 MB run of words, cannot stall). Appends the merged ids of src[0, n) to out; stats,
// when given, receives the heap's pushes and pops. Polls the thread's stop check every kPollPops pops (a partial
// result then: the caller checks stopped()).
template <class Value>
void merge_heap(const uint32_t* src, size_t n, const Value& value, std::vector<uint32_t>& out, MergeStats* stats) {
    struct Entry {
        uint64_t value;
        uint64_t pos;
        uint64_t key;
        bool operator>(const Entry& o) const { return value != o.value ? value > o.value : pos > o.pos; }
    };
    constexpr int64_t kGone = -1;
    std::vector<int64_t> toks(src, src + n);
    std::vector<uint32_t> nxt(n), prv(n);
    for (size_t i = 0; i < n; ++i) {
        nxt[i] = static_cast<uint32_t>(i + 1);
        prv[i] = static_cast<uint32_t>(i - 1);  // wraps for i == 0: "none"
    }
    constexpr uint32_t kNone = ~uint32_t(0);
    std::vector<Entry> heap;
    heap.reserve(n);
    for (size_t i = 0; i + 1 < n; ++i) {
        uint64_t key = uint64_t(toks[i]) << 32 | uint64_t(toks[i + 1]);
        uint64_t v = value(static_cast<uint32_t>(toks[i]), static_cast<uint32_t>(toks[i + 1]));
        if (v != kNoMerge) heap.push_back(Entry{v, i, key});
    }
    auto greater = std::greater<Entry>();
    std::make_heap(heap.begin(), heap.end(), greater);
    uint64_t pushes = heap.size(), pops = 0;
    auto push = [&](uint64_t v, size_t pos, uint64_t key) {
        heap.push_back(Entry{v, pos, key});
        std::push_heap(heap.begin(), heap.end(), greater);
        ++pushes;
    };
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), greater);
        Entry e = heap.back();
        heap.pop_back();
        if (++pops % kPollPops == 0 && stop_requested()) break;  // partial: the caller checks stopped()
        size_t i = e.pos;
        size_t j = nxt[i];
        if (toks[i] == kGone || j >= n || (uint64_t(toks[i]) << 32 | uint64_t(toks[j])) != e.key) continue;
        toks[i] = static_cast<int64_t>(e.value & kIdMask);
        toks[j] = kGone;
        size_t k = nxt[j];
        nxt[i] = static_cast<uint32_t>(k);
        if (k < n) prv[k] = static_cast<uint32_t>(i);
        uint32_t p = prv[i];
        if (p != kNone) {
            uint32_t l = static_cast<uint32_t>(toks[p]), r = static_cast<uint32_t>(toks[i]);
            uint64_t v = value(l, r);
            if (v != kNoMerge) push(v, p, uint64_t(l) << 32 | r);
        }
        if (k < n) {
            uint32_t l = static_cast<uint32_t>(toks[i]), r = static_cast<uint32_t>(toks[k]);
            uint64_t v = value(l, r);
            if (v != kNoMerge) push(v, i, uint64_t(l) << 32 | r);
        }
    }
    if (stats) {
        stats->pushes = pushes;
        stats->pops = pops;
    }
    for (size_t i = 0; i < n; ++i)
        if (toks[i] != kGone) out.push_back(static_cast<uint32_t>(toks[i]));
}

}  // namespace bpe
