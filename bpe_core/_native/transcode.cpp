// The wide tier of the str -> UTF-8 transcoder (transcode.h).
#include "transcode.h"

#include <atomic>
#include <stdexcept>

#if defined(__x86_64__)
#include <immintrin.h>
#define BPE_VBMI2 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2,popcnt")))
#endif

namespace bpe {

namespace {

std::atomic<int> g_tier{-1};  // -1: not chosen yet, 0: scalar, 1: vbmi2

bool cpu_has_vbmi2() {
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vbmi2");
#else
    return false;
#endif
}

int tier() {
    int t = g_tier.load(std::memory_order_relaxed);
    if (t < 0) {
        t = cpu_has_vbmi2() ? 1 : 0;
        g_tier.store(t, std::memory_order_relaxed);
    }
    return t;
}

#if defined(__x86_64__)
// 16 UCS-2 units per step, each widened to a 32-bit lane that holds its UTF-8 in memory order: 1 byte below U+0080,
// 2 below U+0800, else 3 (a surrogate ends the wide run: the scalar loop applies the caller's rules to it). The lane's
// byte mask (0xFF, 0xFFFF, 0xFFFFFF) selects the bytes the compress keeps.
BPE_VBMI2 size_t wide_ucs2(const uint16_t* s, size_t i, size_t n, uint8_t* d, size_t* out) {
    const size_t start = i;
    uint8_t* const d0 = d;
    const __m512i k80 = _mm512_set1_epi32(0x80), k800 = _mm512_set1_epi32(0x800);
    const __m512i k3f = _mm512_set1_epi32(0x3F), kf800 = _mm512_set1_epi32(0xF800), kd800 = _mm512_set1_epi32(0xD800);
    const __m512i lead3 = _mm512_set1_epi32(0x8080E0), lead2 = _mm512_set1_epi32(0x80C0);
    const __m512i len1 = _mm512_set1_epi32(0xFF), len2 = _mm512_set1_epi32(0xFFFF), len3 = _mm512_set1_epi32(0xFFFFFF);
    for (; i + 16 <= n; i += 16) {
        const __m512i c = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
        if (_mm512_cmpeq_epi32_mask(_mm512_and_si512(c, kf800), kd800)) break;
        const __mmask16 one = _mm512_cmplt_epu32_mask(c, k80), two = _mm512_cmplt_epu32_mask(c, k800) & ~one;
        const __m512i t3 = _mm512_slli_epi32(_mm512_and_si512(c, k3f), 16);                      // 3rd byte's bits
        const __m512i t2 = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(c, 6), k3f), 8);  // 2nd byte's
        __m512i w = _mm512_or_si512(_mm512_or_si512(lead3, _mm512_srli_epi32(c, 12)), _mm512_or_si512(t2, t3));
        // 2 bytes: 0xC0 | c >> 6, then 0x80 | (c & 0x3F)
        const __m512i w2 = _mm512_or_si512(_mm512_or_si512(lead2, _mm512_srli_epi32(c, 6)), _mm512_srli_epi32(t3, 8));
        w = _mm512_mask_blend_epi32(two, w, w2);
        w = _mm512_mask_blend_epi32(one, w, c);
        __m512i len = _mm512_mask_blend_epi32(two, len3, len2);
        len = _mm512_mask_blend_epi32(one, len, len1);
        const __mmask64 keep = _mm512_test_epi8_mask(len, len);
        _mm512_storeu_si512(d, _mm512_maskz_compress_epi8(keep, w));
        d += __builtin_popcountll(keep);
    }
    *out = size_t(d - d0);
    return i - start;
}

// 32 UCS-1 (Latin-1) units per step, each widened to a 16-bit lane: 1 byte below U+0080, else 0xC0 | c >> 6 then
// 0x80 | (c & 0x3F).
BPE_VBMI2 size_t wide_ucs1(const uint8_t* s, size_t i, size_t n, uint8_t* d, size_t* out) {
    const size_t start = i;
    uint8_t* const d0 = d;
    const __m512i k80 = _mm512_set1_epi16(0x80), k3f = _mm512_set1_epi16(0x3F), lead2 = _mm512_set1_epi16(0x80C0);
    const __m512i len1 = _mm512_set1_epi16(0xFF), len2 = _mm512_set1_epi16(-1);
    for (; i + 32 <= n; i += 32) {
        const __m512i c = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
        const __mmask32 one = _mm512_cmplt_epu16_mask(c, k80);
        const __m512i w2 = _mm512_or_si512(_mm512_or_si512(lead2, _mm512_srli_epi16(c, 6)),
                                           _mm512_slli_epi16(_mm512_and_si512(c, k3f), 8));
        const __m512i w = _mm512_mask_blend_epi16(one, w2, c);
        const __m512i len = _mm512_mask_blend_epi16(one, len2, len1);
        const __mmask64 keep = _mm512_test_epi8_mask(len, len);
        _mm512_storeu_si512(d, _mm512_maskz_compress_epi8(keep, w));
        d += __builtin_popcountll(keep);
    }
    *out = size_t(d - d0);
    return i - start;
}
#endif

}  // namespace

size_t transcode_wide_ucs2(const uint16_t* s, size_t i, size_t n, uint8_t* d, size_t* out) {
    *out = 0;
#if defined(__x86_64__)
    if (tier() == 1) return wide_ucs2(s, i, n, d, out);
#endif
    return 0;
}

size_t transcode_wide_ucs1(const uint8_t* s, size_t i, size_t n, uint8_t* d, size_t* out) {
    *out = 0;
#if defined(__x86_64__)
    if (tier() == 1) return wide_ucs1(s, i, n, d, out);
#endif
    return 0;
}

const char* transcode_tier() { return tier() == 1 ? "vbmi2" : "scalar"; }

void transcode_set_tier(const std::string& t) {
    if (t == "scalar")
        g_tier.store(0);
    else if (t == "auto")
        g_tier.store(cpu_has_vbmi2() ? 1 : 0);
    else
        throw std::invalid_argument("transcode tier '" + t + "': use 'scalar' or 'auto'");
}

}  // namespace bpe
