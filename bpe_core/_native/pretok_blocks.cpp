// The 64-byte block splitter (see pretok_blocks.h). Written for this project after reading how GigaToken's
// src/pretokenize/fast/ scanners work (class masks, boundary algebra, bad zones left to a scalar ground truth); the
// algebra below is our own, derived from the scalar next_* functions of pretok.cpp.
//
// One block = the 64 bytes from a position i that is known to start a piece (the walker only ever stands on piece
// starts, so no carries from earlier blocks are needed: bit 0 is a start by construction, and every rule below looks
// back only to bytes of the same block, or to "bit 0 started a piece").
//  1. Classify the 64 bytes into u64 masks: L (ASCII letter), N (digit), W (\s: 9-13 and 32), NL (\r \n), SP (32),
//     AP ('), HI (>= 0x80). SSE2 4x16 bytes, or AVX2 2x32 (per-function target attribute, chosen once per process).
//  2. Non-ASCII characters are decoded and classified by the Unicode tables (flags_of), their class spread over
//     their bytes: letters join L (the o200k family: by case too, its marks as letters of both cases), the rest O.
//     V = the first that is a digit or a space (their rules count characters), a character cut by the block's edge,
//     or an o200k mark inside an O run's piece (o200k_mark_cut); bytes >= V are unknown to the algebra. A block of
//     well-formed 2- and 3-byte characters is checked by vector masks and decoded without the strict decoder; the
//     classes of the characters the last block read are kept (WideMemo).
//  3. Boundary algebra (piece starts T) with shifts: for the cl100k family (cl100k, llama3, qwen2):
//       O = not L, N, W            Wnl = W & ~NL            prev(x) = x << 1 (bit j = bit j-1 of x)
//       Ostart  = O & ~prev(O | SP)        ` ?O++`: an O run starts a piece unless a space before it took it
//       Lstart  = L & ~prev(L) & ~prev(Ostart | Wnl)    `P?L++`: a P char that starts a piece takes the letters
//                 (a non-newline \s before a non-space always starts a piece: `\s+(?!\S)` leaves it last)
//       Nstart  = run starts of N, then every 3rd digit (llama3, cl100k) or every digit (qwen2)
//       absNL   = the newlines right after an O (`O++[\r\n]*` takes them)
//       ws runs W' = W & ~absNL: a start at each run's start, after its last newline (`\s*[\r\n]`), and before its
//       last character when the part after the last newline has two or more (`\s+(?!\S)`)
//     r50k: ` ?` takes only a space, before L, N and O alike, and \s runs have no newline rule.
//  4. What the block cannot know: a \s run reaching V (its split depends on what follows), and a contraction
//     (`'s`, `'ll`, ...; only where the apostrophe starts a piece) whose letters reach V. U = the first such
//     position; the starts in (0, U) are certain, and each is the end of a piece: flattened into ends[] (ctz loop).
//     The piece from the last of them runs past what is known: the next block starts there, unless that piece is a
//     letter run to V that starts early in the block: then the blocks after it are read for its letters alone
//     (run_follow), and the next block starts where it ends. Text without spaces (Chinese, Japanese) has such runs.
//  5. A block with no certain start: a letter run longer than the block is followed the same way (run_end); any
//     other (a piece of 64 bytes or more, a wide digit or space near its start) goes to pretok_split_some, one piece
//     at a time, until past the last non-ASCII byte of the block or the character that cut it.
// o200k: the same with a start before an upper-case letter that follows a lower-case one (with letters of both cases,
// \p{Lm} and \p{Lo}, as `U*W+` backtracks: see block_starts), contractions as the suffix of the letters before them,
// and `[\r\n/]*` after an O run; its long runs of letters of both cases are followed (run_end_o200k).
#include "pretok_blocks.h"

#include <algorithm>
#include <cstring>

#include "utf8.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#include <immintrin.h>

namespace bpe {

namespace {

#define BPE_INLINE __attribute__((always_inline)) inline

struct Masks {
    uint64_t l, n, w, nl, sp, ap, hi, up, sl, ct;  // up: A-Z, sl: '/' (o200k), ct: controls 0-31 and 127
};

// ------------------------------------------------------------------------------------------ classification

// x < n (unsigned, bytewise) as a signed compare after flipping the top bits.
BPE_INLINE __m128i below_sse2(__m128i x, int n) {
    return _mm_cmplt_epi8(_mm_xor_si128(x, _mm_set1_epi8(char(0x80))), _mm_set1_epi8(char(0x80 + n)));
}

Masks classify_sse2(const uint8_t* p) {
    Masks m{0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int q = 0; q < 4; ++q) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * q));
        const __m128i letter = below_sse2(_mm_sub_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8('a')), 26);
        const __m128i digit = below_sse2(_mm_sub_epi8(v, _mm_set1_epi8('0')), 10);
        const __m128i sp = _mm_cmpeq_epi8(v, _mm_set1_epi8(' '));
        const __m128i ws = _mm_or_si128(sp, below_sse2(_mm_sub_epi8(v, _mm_set1_epi8(9)), 5));
        const __m128i nl = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\r')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\n')));
        const __m128i ap = _mm_cmpeq_epi8(v, _mm_set1_epi8('\''));
        const __m128i up = below_sse2(_mm_sub_epi8(v, _mm_set1_epi8('A')), 26);
        const __m128i sl = _mm_cmpeq_epi8(v, _mm_set1_epi8('/'));
        const __m128i ct = _mm_or_si128(below_sse2(v, 32), _mm_cmpeq_epi8(v, _mm_set1_epi8(127)));
        const int sh = 16 * q;
        m.ct |= uint64_t(uint16_t(_mm_movemask_epi8(ct))) << sh;
        m.up |= uint64_t(uint16_t(_mm_movemask_epi8(up))) << sh;
        m.sl |= uint64_t(uint16_t(_mm_movemask_epi8(sl))) << sh;
        m.l |= uint64_t(uint16_t(_mm_movemask_epi8(letter))) << sh;
        m.n |= uint64_t(uint16_t(_mm_movemask_epi8(digit))) << sh;
        m.w |= uint64_t(uint16_t(_mm_movemask_epi8(ws))) << sh;
        m.nl |= uint64_t(uint16_t(_mm_movemask_epi8(nl))) << sh;
        m.sp |= uint64_t(uint16_t(_mm_movemask_epi8(sp))) << sh;
        m.ap |= uint64_t(uint16_t(_mm_movemask_epi8(ap))) << sh;
        m.hi |= uint64_t(uint16_t(_mm_movemask_epi8(v))) << sh;
    }
    return m;
}

#define BPE_AVX2 __attribute__((target("avx2,bmi,bmi2,lzcnt,popcnt")))

BPE_AVX2 BPE_INLINE __m256i below_avx2(__m256i x, int n) {
    return _mm256_cmpgt_epi8(_mm256_set1_epi8(char(0x80 + n)), _mm256_xor_si256(x, _mm256_set1_epi8(char(0x80))));
}

// Not inlined: the walker that calls it has no target attribute of its own (it is inlined into walk_avx2); a call
// per 64 bytes.
BPE_AVX2 Masks classify_avx2(const uint8_t* p) {
    Masks m{0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int q = 0; q < 2; ++q) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * q));
        const __m256i letter =
            below_avx2(_mm256_sub_epi8(_mm256_or_si256(v, _mm256_set1_epi8(0x20)), _mm256_set1_epi8('a')), 26);
        const __m256i digit = below_avx2(_mm256_sub_epi8(v, _mm256_set1_epi8('0')), 10);
        const __m256i sp = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(' '));
        const __m256i ws = _mm256_or_si256(sp, below_avx2(_mm256_sub_epi8(v, _mm256_set1_epi8(9)), 5));
        const __m256i nl =
            _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\r')), _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\n')));
        const __m256i ap = _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\''));
        const __m256i up = below_avx2(_mm256_sub_epi8(v, _mm256_set1_epi8('A')), 26);
        const __m256i sl = _mm256_cmpeq_epi8(v, _mm256_set1_epi8('/'));
        const __m256i ct = _mm256_or_si256(below_avx2(v, 32), _mm256_cmpeq_epi8(v, _mm256_set1_epi8(127)));
        const int sh = 32 * q;
        m.ct |= uint64_t(uint32_t(_mm256_movemask_epi8(ct))) << sh;
        m.up |= uint64_t(uint32_t(_mm256_movemask_epi8(up))) << sh;
        m.sl |= uint64_t(uint32_t(_mm256_movemask_epi8(sl))) << sh;
        m.l |= uint64_t(uint32_t(_mm256_movemask_epi8(letter))) << sh;
        m.n |= uint64_t(uint32_t(_mm256_movemask_epi8(digit))) << sh;
        m.w |= uint64_t(uint32_t(_mm256_movemask_epi8(ws))) << sh;
        m.nl |= uint64_t(uint32_t(_mm256_movemask_epi8(nl))) << sh;
        m.sp |= uint64_t(uint32_t(_mm256_movemask_epi8(sp))) << sh;
        m.ap |= uint64_t(uint32_t(_mm256_movemask_epi8(ap))) << sh;
        m.hi |= uint64_t(uint32_t(_mm256_movemask_epi8(v))) << sh;
    }
    return m;
}

// ------------------------------------------------------------------------------------------ non-ASCII characters

// The non-ASCII characters of a block, each classified by the Unicode tables and its class spread over all its
// bytes: letters join L, the others (punctuation, symbols, marks, invalid bytes) are O by default. A digit or a space
// (\p{N} groups count characters, \s runs split before their last character) or a character cut by the block's edge
// ends what the block knows: `cut`. deepseek-v3 also has [\p{P}\p{S}] (ps), the controls of its algebra (x: format
// characters, unassigned, invalid bytes) and its CJK zone. The o200k family keeps its letter cases in ps and x.
struct Wide {
    uint64_t letters, cont;  // bytes of non-ASCII letters; continuation bytes of the classified characters
    uint64_t ps, x, zone;    // deepseek-v3 (above); the o200k family: ps its upper-case letters (only in
                             // [\p{Lu}\p{Lt}...]), x those of both cases (\p{Lm}, \p{Lo}, \p{M}), zone its marks
    unsigned cut;
};

// The last block's classes, for the next block, which starts inside it (at its last certain start, or where a long
// letter run ended): its characters below the last block's cut are not decoded again. Text with long pieces (Chinese,
// Japanese) would otherwise decode most characters several times.
struct WideMemo {
    uintptr_t base = 0;  // the block the classes were read at (its address; 0: none)
    Wide w{};
};

// The byte classes of a block's UTF-8 (SSE2, for every tier): continuation bytes, those of them >= 0xA0, the leads of
// 2- and 3-byte sequences, E0 and ED (whose second bytes are restricted), and what no simple sequence has (the leads of
// 4-byte sequences, C0, C1, F5-FF).
// ua, ub: the leads in a family's two sets of uniform leads (LeadSets below; the AVX2 tier only, 0 in SSE2's).
struct Utf8Masks {
    uint64_t cont, cont_a0, lead2, lead3, e0, ed, other;
    uint64_t ua, ub;
};

// Lead bytes all of whose characters take one class in a family (no digit or space among them, the same classes from
// the family's add()): in the cl100k family Cyrillic's D0, D1 and D3, Latin Extended's C4-CA, the CJK ideographs'
// E5-E9, Hangul's EB and EC (which leads qualify is computed from the Unicode tables, per family). Two sets, A and
// B, each with the class of its leads; a block's leads in them are classified by one nibble lookup per 32 bytes
// instead of a decode and a table load each (callgrind, the split alone on multi_udhr's Russian, AVX2 tier: cl100k
// 25.9 -> 15.7 Ir/B, deepseek-v3 30.3 -> 18.8).
// Membership of byte x: lo[x & 15] & hi[x >> 4], set A in bits 0-2 (hi nibble C, D, E), set B in bits 3-5.
constexpr int kLeadSetMin = 4;  // leads in a block from which the sets are looked up
struct LeadSets {
    alignas(16) uint8_t lo[16];
    alignas(16) uint8_t hi[16];
    uint8_t fa, fb;  // a representative character's flags of each set, for the family's add()
    bool za, zb;     // and its deepseek-v3 zone
    // All ones where the sets hold 3 or more 2-byte (3-byte) leads: the leads that count toward kLeadSetMin.
    uint64_t lead2, lead3;
};

inline Utf8Masks utf8_masks_sse2(const uint8_t* s, const LeadSets&) {
    Utf8Masks u{};
    for (int k = 0; k < 4; ++k) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16 * k));
        auto bits = [k](__m128i v) { return uint64_t(uint16_t(_mm_movemask_epi8(v))) << (16 * k); };
        const __m128i cont = _mm_cmplt_epi8(x, _mm_set1_epi8(-64));           // 80-BF (signed -128..-65)
        const __m128i ge_a0 = _mm_cmpgt_epi8(x, _mm_set1_epi8(-97));          // A0-FF or ASCII
        const __m128i ge_c2 = _mm_cmpgt_epi8(x, _mm_set1_epi8(-63));          // C2-FF or ASCII
        const __m128i ge_e0 = _mm_cmpgt_epi8(x, _mm_set1_epi8(-33));          // E0-FF or ASCII
        const __m128i ge_f0 = _mm_cmpgt_epi8(x, _mm_set1_epi8(-17));          // F0-FF or ASCII
        const __m128i neg = _mm_cmplt_epi8(x, _mm_setzero_si128());           // >= 0x80
        u.cont |= bits(cont);
        u.cont_a0 |= bits(_mm_and_si128(cont, ge_a0));
        u.lead2 |= bits(_mm_andnot_si128(ge_e0, _mm_and_si128(ge_c2, neg)));
        u.lead3 |= bits(_mm_andnot_si128(ge_f0, _mm_and_si128(ge_e0, neg)));
        u.e0 |= bits(_mm_cmpeq_epi8(x, _mm_set1_epi8(char(0xE0))));
        u.ed |= bits(_mm_cmpeq_epi8(x, _mm_set1_epi8(char(0xED))));
        u.other |= bits(_mm_or_si128(_mm_and_si128(ge_f0, neg), _mm_andnot_si128(_mm_or_si128(cont, ge_c2), neg)));
    }
    return u;
}

// The same, AVX2 2x32 bytes (not inlined: each_wide, which calls it, has no target attribute of its own).
BPE_AVX2 __attribute__((noinline)) Utf8Masks utf8_masks_avx2(const uint8_t* s, const LeadSets& sets) {
    Utf8Masks u{};
    for (int k = 0; k < 2; ++k) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32 * k));
#define BPE_BITS(v) (uint64_t(uint32_t(_mm256_movemask_epi8(v))) << (32 * k))
        const __m256i cont = _mm256_cmpgt_epi8(_mm256_set1_epi8(-64), x);
        const __m256i ge_a0 = _mm256_cmpgt_epi8(x, _mm256_set1_epi8(-97));
        const __m256i ge_c2 = _mm256_cmpgt_epi8(x, _mm256_set1_epi8(-63));
        const __m256i ge_e0 = _mm256_cmpgt_epi8(x, _mm256_set1_epi8(-33));
        const __m256i ge_f0 = _mm256_cmpgt_epi8(x, _mm256_set1_epi8(-17));
        const __m256i neg = _mm256_cmpgt_epi8(_mm256_setzero_si256(), x);
        u.cont |= BPE_BITS(cont);
        u.cont_a0 |= BPE_BITS(_mm256_and_si256(cont, ge_a0));
        u.lead2 |= BPE_BITS(_mm256_andnot_si256(ge_e0, _mm256_and_si256(ge_c2, neg)));
        u.lead3 |= BPE_BITS(_mm256_andnot_si256(ge_f0, _mm256_and_si256(ge_e0, neg)));
        u.e0 |= BPE_BITS(_mm256_cmpeq_epi8(x, _mm256_set1_epi8(char(0xE0))));
        u.ed |= BPE_BITS(_mm256_cmpeq_epi8(x, _mm256_set1_epi8(char(0xED))));
        u.other |= BPE_BITS(_mm256_or_si256(_mm256_and_si256(ge_f0, neg),
                                            _mm256_andnot_si256(_mm256_or_si256(cont, ge_c2), neg)));
#undef BPE_BITS
    }
    // The lead sets only where a block has several leads: German's scattered umlauts (lead C3, in no set) would pay
    // for the lookups and gain nothing (callgrind, cl100k's split on German: 11.6 Ir/B without the lookups, 12.6
    // with them in every block), nor Russian in the o200k family, whose sets hold one 2-byte lead (DA, Arabic): its
    // Cyrillic has both cases, in no set (31.1 without, 34.5 with).
    if (__builtin_popcountll((u.lead2 & sets.lead2) | (u.lead3 & sets.lead3)) < kLeadSetMin) return u;
    const __m256i lo_t = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(sets.lo)));
    const __m256i hi_t = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(sets.hi)));
    const __m256i nib = _mm256_set1_epi8(0x0F), zero = _mm256_setzero_si256();
    for (int k = 0; k < 2; ++k) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32 * k));
        const __m256i t = _mm256_and_si256(_mm256_shuffle_epi8(lo_t, _mm256_and_si256(x, nib)),
                                           _mm256_shuffle_epi8(hi_t, _mm256_and_si256(_mm256_srli_epi16(x, 4), nib)));
#define BPE_NOT_BITS(v) (uint64_t(~uint32_t(_mm256_movemask_epi8(v))) << (32 * k))
        u.ua |= BPE_NOT_BITS(_mm256_cmpeq_epi8(_mm256_and_si256(t, _mm256_set1_epi8(0x07)), zero));
        u.ub |= BPE_NOT_BITS(_mm256_cmpeq_epi8(_mm256_and_si256(t, _mm256_set1_epi8(0x38)), zero));
#undef BPE_NOT_BITS
    }
    return u;
}

// The flags of every code point of the BMP, with deepseek-v3's CJK zone in bit 7 (kBmpZone), built once from the
// Unicode tables: one load per 2- or 3-byte character where flags_of takes two and the zone test two compares
// (callgrind, deepseek-v3 on Japanese: 12 instructions fewer per character). 64 KiB.
constexpr uint8_t kBmpZone = 0x80;
static_assert(((kFlagL | kFlagN | kFlagS | kFlagU | kFlagW | kFlagCrLf | kFlagPS) & kBmpZone) == 0);
struct FlagsBmp {
    uint8_t f[0x10000];
};

inline const FlagsBmp& flags_bmp() {
    static const FlagsBmp* t = [] {
        auto* x = new FlagsBmp;
        for (uint32_t cp = 0; cp < 0x10000; ++cp) x->f[cp] = uint8_t(flags_of(cp) | (dsv3_cjk(cp) ? kBmpZone : 0));
        return x;
    }();
    return *t;
}

// The bytes of the characters whose leads are in `leads` (well-formed 2- and 3-byte sequences: a lead's continuation
// bytes follow it).
BPE_INLINE uint64_t spread_leads(uint64_t leads, uint64_t cont) {
    const uint64_t one = (leads << 1) & cont;
    return leads | one | ((one << 1) & cont);
}

// The non-ASCII characters of the block at s (64 bytes readable, avail of them text) from its high-byte mask, each
// decoded once: add(w, flags, in deepseek-v3's CJK zone, bits of its bytes) classifies it into w; their
// continuation bytes go to w.cont. Those the memo already holds are taken from it. Sets w.cut: where the block's
// knowledge ends (64, or the first digit, space or character cut by the block's edge).
// A block whose characters (from where the memo ends) are all well-formed 2- and 3-byte sequences takes the fast way:
// the tier's masks (utf8_masks_*) check the form, each character is decoded without checks, add() sees its lead's
// bit alone, and the classes are spread over the characters' bytes at the end. Any other block (4-byte characters,
// invalid bytes) goes one character at a time through the strict decoder.
using Utf8MasksFn = Utf8Masks (*)(const uint8_t*, const LeadSets&);

BPE_INLINE bool wide_cuts(uint8_t f) { return f & (kFlagN | kFlagS); }

// The LeadSets of a family (its add(), as each_wide takes it), from the BMP's flags: a lead qualifies where every
// character it leads gets the same classes from add() and none cuts. Set A holds the leads of the class that has the
// most of them, set B those of the next (ties: the smaller class code).
template <class Add>
LeadSets make_lead_sets(Add add) {
    const uint8_t* bmp = flags_bmp().f;
    auto code_of = [&](uint32_t cp) {  // -1: the character cuts
        const uint8_t fz = bmp[cp], f = fz & uint8_t(~kBmpZone);
        if (wide_cuts(f)) return -1;
        Wide t{};
        add(t, f, (fz & kBmpZone) != 0, 1);
        return int(t.letters & 1) | int(t.ps & 1) << 1 | int(t.x & 1) << 2 | int(t.zone & 1) << 3;
    };
    int lead_code[256];
    uint32_t first_cp[256] = {};
    int count[16] = {};
    std::fill(lead_code, lead_code + 256, -1);
    for (uint32_t b0 = 0xC2; b0 <= 0xEF; ++b0) {
        uint32_t first = (b0 & 0x0Fu) << 12, last = first + 0x1000;  // the code points [first, last) it leads
        if (b0 < 0xE0) first = (b0 & 0x1Fu) << 6, last = first + 64;
        if (b0 == 0xE0) first = 0x800;   // (E0's second byte is A0-BF)
        if (b0 == 0xED) last = 0xD800;   // (ED's is 80-9F: no surrogates)
        const int c = code_of(first);
        bool same = c >= 0;
        for (uint32_t cp = first + 1; same && cp < last; ++cp) same = code_of(cp) == c;
        if (same) lead_code[b0] = c, first_cp[b0] = first, ++count[c];
    }
    int ca = -1, cb = -1;
    for (int c = 0; c < 16; ++c) {
        if (!count[c]) continue;
        if (ca < 0 || count[c] > count[ca]) {
            cb = ca, ca = c;
        } else if (cb < 0 || count[c] > count[cb]) {
            cb = c;
        }
    }
    LeadSets sets{};
    int n2 = 0, n3 = 0;
    sets.hi[0xC] = 0x09, sets.hi[0xD] = 0x12, sets.hi[0xE] = 0x24;
    for (uint32_t b0 = 0xC2; b0 <= 0xEF; ++b0) {
        const int c = lead_code[b0];
        if (c < 0 || (c != ca && c != cb)) continue;
        const uint8_t fz = bmp[first_cp[b0]], f = fz & uint8_t(~kBmpZone);
        const bool zone = fz & kBmpZone;
        sets.lo[b0 & 15] |= uint8_t((c == ca ? 1u : 8u) << ((b0 >> 4) - 0xC));
        (c == ca ? sets.fa : sets.fb) = f;
        (c == ca ? sets.za : sets.zb) = zone;
        ++(b0 < 0xE0 ? n2 : n3);
    }
    sets.lead2 = n2 >= 3 ? ~uint64_t(0) : 0;
    sets.lead3 = n3 >= 3 ? ~uint64_t(0) : 0;
    return sets;
}

template <Utf8MasksFn UM, class Add>
inline void each_wide(const uint8_t* s, size_t avail, uint64_t hi, WideMemo& memo, Wide& w, Add add,
                      const LeadSets& sets) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(s);
    uint64_t from_mask = ~uint64_t(0);
    if (memo.base && at >= memo.base && at - memo.base < memo.w.cut) {
        const unsigned d = unsigned(at - memo.base), from = memo.w.cut - d;
        w = memo.w;
        w.letters >>= d, w.cont >>= d, w.ps >>= d, w.x >>= d, w.zone >>= d;
        from_mask = from >= 64 ? 0 : ~uint64_t(0) << from;
        hi &= from_mask;
    }
    w.cut = 64;
    if (hi) {
        const Utf8Masks u = UM(s, sets);
        const uint64_t cont = u.cont & from_mask;
        uint64_t leads = (u.lead2 | u.lead3) & from_mask;
        const uint64_t expect = ((leads << 1) | ((u.lead3 & from_mask) << 2));  // bits past 63 are the next block's
        const uint64_t bad = (u.other & from_mask) | (cont ^ expect) | ((u.e0 << 1) & cont & ~u.cont_a0) |
                             ((u.ed << 1) & u.cont_a0 & from_mask);
        if (!bad) {
            // a character cut by the block's edge: a 2-byte lead at 63, a 3-byte one at 62 or 63
            const uint64_t edge = (u.lead2 & (uint64_t(1) << 63)) | (u.lead3 & (uint64_t(3) << 62));
            unsigned cut = 64;
            if (edge & leads) {
                cut = unsigned(__builtin_ctzll(edge & leads));
                leads &= (uint64_t(1) << cut) - 1;
            }
            Wide lw{};  // the classes of the leads alone: those in the family's lead sets at once, the rest each
            const uint64_t ua = u.ua & leads, ub = u.ub & leads;
            if (ua | ub) {
                add(lw, sets.fa, sets.za, ua);
                add(lw, sets.fb, sets.zb, ub);
                leads &= ~(ua | ub);
            }
            const uint8_t* bmp = flags_bmp().f;
            while (leads) {
                const unsigned j = unsigned(__builtin_ctzll(leads));
                const uint32_t b0 = s[j], b1 = s[j + 1] & 0x3Fu;
                const uint32_t cp = b0 < 0xE0 ? ((b0 & 0x1Fu) << 6) | b1
                                              : ((b0 & 0x0Fu) << 12) | (b1 << 6) | (s[j + 2] & 0x3Fu);
                const uint8_t fz = bmp[cp], f = fz & uint8_t(~kBmpZone);
                const bool zone = fz & kBmpZone;  // (no 2-byte character is in deepseek-v3's CJK zone)
                if (wide_cuts(f)) {
                    cut = j;
                    break;
                }
                add(lw, f, zone, uint64_t(1) << j);
                leads &= leads - 1;
            }
            const uint64_t below = cut >= 64 ? ~uint64_t(0) : (uint64_t(1) << cut) - 1;
            w.letters |= spread_leads(lw.letters, cont) & below;
            w.ps |= spread_leads(lw.ps, cont) & below;
            w.x |= spread_leads(lw.x, cont) & below;
            w.zone |= spread_leads(lw.zone, cont) & below;
            w.cont |= cont & below;
            w.cut = cut;
            memo.base = at, memo.w = w;
            return;
        }
    }
    while (hi) {
        const unsigned j = unsigned(__builtin_ctzll(hi));
        uint32_t len;
        const uint32_t cp = utf8_decode(s, avail, j, len);
        const uint8_t f = flags_of(cp);
        if (j + len > 64 || wide_cuts(f)) {
            w.cut = j;
            break;
        }
        const uint64_t bits = ((uint64_t(1) << len) - 1) << j;
        add(w, f, dsv3_cjk(cp), bits);
        w.cont |= bits & ~(uint64_t(1) << j);
        hi &= ~bits;
    }
    memo.base = at, memo.w = w;
}

// With kMarks (the cl100k family's `[\p{L}\p{M}]` letters), marks join the letters.
template <bool kMarks, Utf8MasksFn UM>
__attribute__((noinline)) Wide classify_wide(const uint8_t* s, size_t avail, uint64_t hi, WideMemo& memo) {
    Wide w{};
    auto add = [](Wide& t, uint8_t f, bool, uint64_t bits) {
        if ((f & kFlagL) || (kMarks && flags_mark(f))) t.letters |= bits;
    };
    static const LeadSets sets = make_lead_sets(add);
    each_wide<UM>(s, avail, hi, memo, w, add, sets);
    return w;
}

// The same for deepseek-v3: letters and marks join L, [\p{P}\p{S}] joins PS, the CJK ranges of its second regex
// are the zone Z (whatever their class), the rest (format characters, unassigned, invalid bytes) are controls for the
// algebra (X: no rule matches them but the prefix); a digit or a space cuts, as a character cut by the block's edge.
template <Utf8MasksFn UM>
__attribute__((noinline)) Wide classify_wide_dsv3(const uint8_t* s, size_t avail, uint64_t hi, WideMemo& memo) {
    Wide w{};
    auto add = [](Wide& t, uint8_t f, bool zone, uint64_t bits) {
        if ((f & kFlagL) || flags_mark(f))
            t.letters |= bits;
        else if (f & kFlagPS)
            t.ps |= bits;
        else
            t.x |= bits;
        if (zone) t.zone |= bits;
    };
    static const LeadSets sets = make_lead_sets(add);
    each_wide<UM>(s, avail, hi, memo, w, add, sets);
    return w;
}

// The same for the o200k family: its letters by case, U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and W =
// [\p{Ll}\p{Lm}\p{Lo}\p{M}]: those only in U (upper case) in ps, those in both (\p{Lm}, \p{Lo}, \p{M}) in x, the rest
// of the letters (\p{Ll}) only in letters; the marks also in zone (block_starts: o200k_mark_cut). kLlama: llama.cpp's
// classes (`(?=[\p{L}])[^a-z]`, `[^A-Z]`), where every letter above ASCII is in both and a mark is no letter (O).
template <bool kLlama, Utf8MasksFn UM>
__attribute__((noinline)) Wide classify_wide_o200k(const uint8_t* s, size_t avail, uint64_t hi, WideMemo& memo) {
    Wide w{};
    auto add = [](Wide& t, uint8_t f, bool, uint64_t bits) {
        if (!(f & (kLlama ? kFlagL : kFlagL | kFlagU | kFlagW))) return;  // (U and W hold the letters and marks)
        t.letters |= bits;
        if (kLlama || (f & (kFlagU | kFlagW)) == (kFlagU | kFlagW))
            t.x |= bits;
        else if (f & kFlagU)
            t.ps |= bits;
        if (!kLlama && !(f & kFlagL)) t.zone |= bits;  // a mark
    };
    static const LeadSets sets = make_lead_sets(add);
    each_wide<UM>(s, avail, hi, memo, w, add, sets);
    return w;
}

// ------------------------------------------------------------------------------------------ boundary algebra

// Spread the bits of `seed` toward higher bits through runs of `within` (log steps).
BPE_INLINE uint64_t smear_up(uint64_t seed, uint64_t within) {
    uint64_t a = seed, m = within;
    for (int sh = 1; sh < 64; sh <<= 1) {
        a |= (a << sh) & m;
        m &= m << sh;
    }
    return a;
}

// The same toward lower bits.
BPE_INLINE uint64_t smear_down(uint64_t seed, uint64_t within) {
    uint64_t a = seed, m = within;
    for (int sh = 1; sh < 64; sh <<= 1) {
        a |= (a >> sh) & m;
        m &= m >> sh;
    }
    return a;
}

// Every `group`-th digit of each run of N, counted from the run's start (`\p{N}{1,3}`: 3; qwen2's `\p{N}`: 1).
template <int kGroup>
BPE_INLINE uint64_t digit_starts(uint64_t n) {
    if (kGroup == 1) return n;
    uint64_t x = n & ~(n << 1), acc = x;
    const uint64_t three = n & (n << 1) & (n << 2);  // this digit and the two before it are digits (the same run)
    while (x) {
        x = (x << 3) & three;
        acc |= x;
    }
    return acc;
}

// kFamO200kBare: the o200k family without contractions (Tekken).
enum Family { kFamR50k, kFamCl100k, kFamO200k, kFamDsv3, kFamR50kDigits, kFamO200kBare };

// A letter run's class (see run_end below): the family's letters (deepseek-v3: within one zone), or deepseek-v3's
// `[PS][A-Za-z]+`, ASCII letters. A block whose last piece is such a run up to its end says so in a TailRun (kRunNone:
// it is not), with the run's zone (deepseek-v3: all ones for the CJK zone).
enum RunClass { kRunNone, kRunLetters, kRunAscii };
constexpr unsigned kFollowBelow = 48;  // (see block_starts' end; callgrind: 10% fewer on ja, 1% more on en and ru)
struct TailRun {
    RunClass rc;
    uint64_t in_zone;
    unsigned known;  // where the block's knowledge ended (its `v`)
};

// The ASCII contraction at s[j] (an apostrophe that starts a piece) whose letters lie below v: its end, 0 for none,
// or ~0u when the letters reach v (unknown here).
template <Family F>
BPE_INLINE unsigned contraction_end(const uint8_t* s, unsigned j, unsigned v) {
    if (j + 1 >= v || s[j + 1] >= 0x80) return ~0u;  // a non-ASCII letter might fold to one (cl100k: U+017F)
    constexpr bool kExact = F == kFamR50k || F == kFamR50kDigits;  // r50k's contractions are lower-case only
    const uint8_t a = kExact ? s[j + 1] : uint8_t(s[j + 1] | 0x20);  // | 0x20: exactly the ASCII capitals
    const bool letter_a = (s[j + 1] | 0x20) >= 'a' && (s[j + 1] | 0x20) <= 'z';
    if (!letter_a) return 0;
    if (a == 's' || a == 'd' || a == 'm' || a == 't') return j + 2;
    if (a != 'l' && a != 'v' && a != 'r') return 0;
    if (j + 2 >= v || s[j + 2] >= 0x80) return ~0u;
    const uint8_t b = kExact ? s[j + 2] : uint8_t(s[j + 2] | 0x20);
    if (!((s[j + 2] | 0x20) >= 'a' && (s[j + 2] | 0x20) <= 'z')) return 0;
    if ((a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e')) return j + 3;
    return 0;
}

// Where the o200k family's marks (the bytes `marks`) end what the block knows (v when they do not). A mark is in both
// letter classes, as \p{Lm} and \p{Lo} are, but also in the prefix `[^\r\n\p{L}\p{N}]?` and in ` ?[^\s\p{L}\p{N}]+`.
// After a letter, a space, a digit, a newline, at the block's start (a piece's), or after the first character of an O
// run that no space precedes (a prefix: `U*W+` takes the mark next) it is a letter of both cases to every rule; after
// an O inside an O run's piece (` ?O+`, which takes marks too) it is not: the first such mark is the cut. Each rule
// here looks back only, so which O start a piece below that mark is known from the bytes before it. (callgrind, the
// split alone, AVX2, against a cut at every mark: o200k on multi_udhr 16.58 -> 12.78 Ir/B, on its French, whose
// accents are combining marks, 69.9 -> 21.7.)
BPE_INLINE unsigned o200k_mark_cut(const Masks& m, uint64_t wide_letters, uint64_t cont, uint64_t marks, unsigned v) {
    const uint64_t valid = v == 64 ? ~uint64_t(0) : (uint64_t(1) << v) - 1;
    const uint64_t O = valid & ~(m.l | wide_letters | m.n | m.w), NL = m.nl & valid;
    const uint64_t o = O & ~smear_up(NL & (O << 1), NL | (m.sl & valid));
    const uint64_t o_start = o & ~((o | m.sp) << 1);
    const uint64_t o_start_chars = cont ? smear_up(o_start, cont & o) : o_start;
    const uint64_t in_o_run = marks & valid & ((o & ~o_start_chars) << 1);
    return in_o_run ? unsigned(__builtin_ctzll(in_o_run)) : v;
}

// s[j] (j < 63) is ASCII punctuation or a symbol and s[j + 1] an ASCII letter: deepseek-v3's `[PS][A-Za-z]+`.
BPE_INLINE bool ps_then_ascii_letter(const uint8_t* s, const Masks& m, unsigned j) {
    return s[j] > 32 && s[j] < 127 && !(((m.l | m.n) >> j) & 1) && ((m.l >> (j + 1)) & 1);
}

// The certain piece starts in (0, 64) of the block at s (s[0] starts a piece): bit j set = a piece starts at s[j].
// Bit 0 set: the last piece is a letter run past what the block knows, described in `tail`.
template <Family F, int kGroup, bool kMarks, Utf8MasksFn UM>
BPE_INLINE uint64_t block_starts(const uint8_t* s, size_t avail, const Masks& m, WideMemo& memo, TailRun& tail) {
    unsigned v = 64;
    uint64_t wide_letters = 0, cont = 0;
    uint64_t wide_ps = 0, wide_x = 0, zone = 0, marks = 0;
    if (m.hi) {
        if (F == kFamO200k || F == kFamO200kBare) {  // (kMarks: llama.cpp's letter classes)
            const Wide w = classify_wide_o200k<kMarks, UM>(s, avail, m.hi, memo);
            v = w.cut, wide_letters = w.letters, cont = w.cont, wide_ps = w.ps, wide_x = w.x, marks = w.zone;
        } else if (F == kFamDsv3) {
            const Wide w = classify_wide_dsv3<UM>(s, avail, m.hi, memo);
            v = w.cut, wide_letters = w.letters, cont = w.cont, wide_ps = w.ps, wide_x = w.x, zone = w.zone;
        } else {
            const Wide w = classify_wide<kMarks, UM>(s, avail, m.hi, memo);
            v = w.cut, wide_letters = w.letters, cont = w.cont;
        }
    }
    if (avail < 64) v = std::min(v, unsigned(avail));  // a text's last bytes (walk's tail block): the end is v
    if (marks) v = o200k_mark_cut(m, wide_letters, cont, marks, v);
    const uint64_t valid = v == 64 ? ~uint64_t(0) : (uint64_t(1) << v) - 1;
    const uint64_t L = (m.l | wide_letters) & valid, N = m.n & valid, W = m.w & valid, SP = m.sp & valid;
    const uint64_t O = valid & ~(L | N | W);
    uint64_t t;
    if (F == kFamR50k) {
        const uint64_t lead = SP << 1;  // ` ?` takes a space (which always starts a piece before a non-\s)
        const uint64_t ws_start = W & ~(W << 1), ws_last = W & ~(W >> 1);
        t = (L & ~(L << 1) & ~lead) | (N & ~(N << 1) & ~lead) | (O & ~(O << 1) & ~lead) | ws_start |
            (ws_last & (W << 1));
    } else if (F == kFamR50kDigits) {
        // r50k with every digit a piece and the character after it a fragment's start: a whitespace run before a
        // digit is not split before its last character, and no space is a digit's ` ?`.
        const uint64_t lead = SP << 1;
        const uint64_t ws_start = W & ~(W << 1), ws_last = W & ~(W >> 1);
        t = (L & ~(L << 1) & ~lead) | N | (valid & (N << 1)) | (O & ~(O << 1) & ~lead) | ws_start |
            (ws_last & (W << 1) & ~(N >> 1));
    } else if (F == kFamO200k || F == kFamO200kBare) {
        // As the cl100k family, with: no contraction pieces (a contraction after letters is their suffix, below);
        // a start before an upper-case letter after a lower-case one (`U*W+|U+W*`); an O run takes the newlines
        // and slashes after it (`[\r\n/]*`: the first of them a newline, else the slashes are O+ already).
        // Letters of both cases (BO: \p{Lm}, \p{Lo}, above ASCII) make `U*W+` backtrack: a piece is in U* until its
        // first lower-case letter (LO), then in W+ (phase B), which an upper-case letter (UP) ends; and a U* run
        // that reaches the end of the letters, holds a BO and ends in UP, gives them back to after its last BO
        // (W+ must match one): the UP after that BO start a piece of their own (`U+W*`).
        const uint64_t NL = m.nl & valid, Wnl = W & ~NL, UP = (m.up | wide_ps) & valid, BO = wide_x & valid;
        const uint64_t LO = L & ~UP & ~BO;
        const uint64_t absorbed = smear_up(NL & (O << 1), NL | (m.sl & valid));
        const uint64_t o = O & ~absorbed;
        const uint64_t o_start = o & ~((o | SP) << 1);
        const uint64_t o_start_chars = cont ? smear_up(o_start, cont & o) : o_start;
        const uint64_t phase_b = BO ? smear_up(LO, LO | BO) : LO;
        uint64_t l_start = (L & ~(L << 1) & ~((o_start_chars | Wnl) << 1)) | (UP & ~cont & (phase_b << 1));
        if (BO) {
            const uint64_t up_to_end = smear_down(UP & ~(L >> 1) & (valid >> 1), UP);  // UP runs ending the letters
            l_start |= up_to_end & ~(UP << 1) & ((BO & ~phase_b) << 1);
        }
        const uint64_t w = W & ~absorbed;
        const uint64_t r = NL & w;
        const uint64_t has_nl_after = smear_down(r, w);
        const uint64_t seg = w & ~has_nl_after;
        const uint64_t seg_last = seg & ~(seg >> 1);
        t = o_start | l_start | digit_starts<kGroup>(N) | (w & ~(w << 1)) | (w & (r << 1) & ~has_nl_after) |
            (seg_last & (seg << 1));
    } else if (F == kFamDsv3) {
        // deepseek-v3 (pretok.cpp next_deepseek_v3), ASCII only: digit groups of 3 are pieces and the character after
        // a digit starts a fragment; in a fragment, PS (ASCII punctuation and symbols) runs start a piece unless a
        // space before them does (` ?`), a lone PS that starts a piece takes the letters after it
        // (`[PS][A-Za-z]+`), a letter run starts one unless the character before it is a space other than \r \n
        // or a control (the prefix `[^\r\n\p{L}\p{P}\p{S}]?`: those always start a piece there) or such a PS; a
        // run of controls (no rule matches them: the text up to the next match) starts one, and so does its last
        // control before a letter; whitespace as the cl100k family, except that a run ending at a digit (the end of
        // its fragment) is not split before its last character.
        // Non-ASCII: letters and marks are L, punctuation and symbols PS, the rest X, their bits over all their
        // bytes (so a rule that looks at the character before looks at its last byte); Z, the CJK ranges, is a zone
        // of its own: B, where the zone changes, starts a fragment, and no rule reaches across it.
        const uint64_t NL = m.nl & valid, Wnl = W & ~NL, Z = zone & valid;
        const uint64_t X = ((m.ct & ~W) | wide_x) & valid, PS = (O & ~X & ~m.hi) | (wide_ps & valid);
        const uint64_t B = (Z ^ (Z << 1)) & valid;
        auto prev = [B](uint64_t x) { return (x << 1) & ~B; };  // the character before, in the same fragment
        const uint64_t ascii_l = m.l & valid;
        const uint64_t ps_start = PS & ~prev(PS) & ~prev(SP);
        const uint64_t lone_ps = ps_start & ~m.hi & (ascii_l >> 1);  // `[PS][A-Za-z]+`: ASCII on both sides
        const uint64_t a1_letters = smear_up(lone_ps << 1, ascii_l);
        const uint64_t l_start = (L & ~prev(L) & ~prev(Wnl | X | lone_ps)) | (L & ~ascii_l & (a1_letters << 1));
        // an X run starts a piece, and so does its last character before a letter of the same fragment
        const uint64_t x_last = smear_down(X & ((L & ~B) >> 1), cont >> 1) & ~cont;
        const uint64_t x_start = (X & ~prev(X)) | (x_last & prev(X));
        const uint64_t abs_nl = smear_up(NL & prev(PS), NL);
        const uint64_t w = W & ~abs_nl;
        const uint64_t r = NL & w;
        const uint64_t has_nl_after = smear_down(r, w);
        const uint64_t seg = w & ~has_nl_after;
        const uint64_t seg_last = seg & ~(seg >> 1);
        t = digit_starts<3>(N) | (valid & ~N & (N << 1)) | ps_start | l_start | x_start | (w & ~(w << 1)) |
            (w & (r << 1) & ~has_nl_after) | (seg_last & (seg << 1) & ~((N | Z) >> 1)) | B;
    } else {
        const uint64_t NL = m.nl & valid, Wnl = W & ~NL;
        const uint64_t o_start = O & ~((O | SP) << 1);
        const uint64_t o_start_chars = smear_up(o_start, cont & O);  // all the bytes of an O that starts a piece
        const uint64_t l_start = L & ~(L << 1) & ~((o_start_chars | Wnl) << 1);
        const uint64_t abs_nl = smear_up(NL & (O << 1), NL);
        const uint64_t w = W & ~abs_nl;
        const uint64_t r = NL & w;
        const uint64_t has_nl_after = smear_down(r, w);
        const uint64_t seg = w & ~has_nl_after;  // the part of each run after its last newline
        const uint64_t seg_last = seg & ~(seg >> 1);
        t = o_start | l_start | digit_starts<kGroup>(N) | (w & ~(w << 1)) | (w & (r << 1) & ~has_nl_after) |
            (seg_last & (seg << 1));
    }
    // What the block cannot know: a \s run that reaches v (its last piece depends on what follows it).
    unsigned u = v;
    if (v > 0 && ((W >> (v - 1)) & 1)) {
        const uint64_t not_ws = valid & ~W;
        u = not_ws ? 64u - unsigned(__builtin_clzll(not_ws)) : 0u;
    }
    // Contractions: an apostrophe that starts a piece, followed by the letters of one, is that piece (o200k: an
    // apostrophe right after a letter, whose piece takes the contraction as its suffix).
    const uint64_t below_u0 = u >= 64 ? ~uint64_t(0) : (uint64_t(1) << u) - 1;
    uint64_t aps = F == kFamDsv3 || F == kFamO200kBare ? 0 : m.ap & valid & below_u0;
    aps &= F == kFamO200k ? (L << 1) : (t | 1);
    while (aps) {
        const unsigned j = unsigned(__builtin_ctzll(aps));
        aps &= aps - 1;
        const unsigned e = contraction_end<F>(s, j, v);
        if (e == ~0u) {
            u = j;
            break;
        }
        if (e) {
            if (F == kFamO200k) t &= ~(uint64_t(1) << j);  // the apostrophe continues the letters' piece
            t &= ~(((uint64_t(1) << (e - j - 1)) - 1) << (j + 1));  // nothing starts inside it ...
            if (e < 64) t |= uint64_t(1) << e;            // ... and the next piece starts after it
            if (F == kFamO200k && e < 64) aps &= ~(uint64_t(1) << e);  // an apostrophe there is not a suffix
            if (F == kFamO200k && e < 64 && ((wide_x >> e) & 1)) {
                // letters of both cases right after it start a piece in U*, which phase_b (smeared from the
                // contraction's letters) does not see: known up to that start, the next block starts there
                u = std::min(u, e + 1);
                break;
            }
        }
    }
    const uint64_t below_u = u >= 64 ? ~uint64_t(0) : (uint64_t(1) << u) - 1;
    const uint64_t starts = t & below_u & ~uint64_t(1);
    // The last piece: one character of prefix at most, then letters to the block's end (all of it known)?
    // Asked only where that piece starts early in the block (a block from its start would know little more) and the
    // block has non-ASCII text (long ASCII words are rare).
    if (F == kFamO200k || F == kFamO200kBare || !m.hi) return starts;
    const unsigned e = 63 - unsigned(__builtin_clzll(starts | 1));
    if (e - 1 < kFollowBelow - 1 && u == v && ((L >> (v - 1)) & 1)) {
        const uint64_t after = (e >= 63 ? 0 : ~uint64_t(0) << (e + 1)) & valid;
        if (F == kFamDsv3 && e < 63 && ps_then_ascii_letter(s, m, e)) {
            if (!(after & ~m.l)) {
                tail = {kRunAscii, 0, v};
                return starts | 1;
            }  // `[PS][A-Za-z]+`
        } else {
            // (one zone: a change of zone starts a piece, and e is the last start)
            const uint64_t in_zone = ((zone >> (v - 1)) & 1) ? ~uint64_t(0) : 0;
            if (!(after & ~L & ~cont)) {
                tail = {kRunLetters, in_zone, v};
                return starts | 1;
            }
        }
    }
    return starts;
}

// ------------------------------------------------------------------------------------------ the walker

// A letter run longer than a block. When a block holds no certain start and its piece is one character of prefix at
// most and then letters up to the end of what the block knows, that piece is a letter run (every family's letter
// alternative ends at the first character that is not one of its letters), so the blocks after it are read for that
// alone: their letters continue it, and its first byte that is not one (a digit, space, punctuation, the end of the
// text, or for deepseek-v3 a change of CJK zone) ends it. Without this, Chinese, Japanese and other text written
// without spaces (runs of 64 bytes and more) would go to the scalar splitter a block at a time.

// The letters of the 64 bytes at p (avail of them text) for a run of class rc: bit j = p[j] is a byte of one; `known`
// is where the window's knowledge ends (a wide digit or space, or a character cut by the window's edge, as
// each_wide), `zone` the bytes of deepseek-v3's CJK zone.
template <Family F, bool kMarks, Utf8MasksFn UM>
BPE_INLINE uint64_t run_letters(const uint8_t* p, size_t avail, const Masks& m, RunClass rc, WideMemo& memo,
                                unsigned& known, uint64_t& zone) {
    known = 64, zone = 0;
    if (rc == kRunAscii || !m.hi) return m.l;
    if (F == kFamDsv3) {
        const Wide w = classify_wide_dsv3<UM>(p, avail, m.hi, memo);
        known = w.cut, zone = w.zone;
        return m.l | w.letters;
    }
    const Wide w = classify_wide<kMarks, UM>(p, avail, m.hi, memo);
    known = w.cut;
    return m.l | w.letters;
}

// The window a followed run reads next: the 64 bytes from q, or the rest of the text copied into tail with zeros
// after it (no letters) where fewer are left.
BPE_INLINE const uint8_t* window_at(const uint8_t* s, size_t n, size_t q, uint8_t* tail) {
    if (n - q >= 64) return s + q;
    __builtin_memset(tail, 0, 64);
    __builtin_memcpy(tail, s + q, n - q);
    return tail;
}

// The end of a letter run of class rc (and zone in_zone) that is known to go on to q, a character's start: the first
// byte from q on that is not one of its letters ends it (the end of the text too). The character at q, when it ends
// before edge (the end of the block that knew the run), is a wide digit or space: the run ends there.
template <Family F, bool kMarks, Masks (*Classify)(const uint8_t*), Utf8MasksFn UM>
__attribute__((noinline)) size_t run_follow(const uint8_t* s, size_t n, size_t q, size_t edge, RunClass rc,
                                            uint64_t in_zone, WideMemo& memo) {
    if (q < edge) {
        uint32_t len;
        utf8_decode(s, n, q, len);
        if (q + len <= edge) return q;
    }
    for (;;) {
        uint8_t tail[64];
        const uint8_t* p = window_at(s, n, q, tail);
        const Masks mq = Classify(p);
        unsigned v;
        uint64_t zq;
        const uint64_t lq = run_letters<F, kMarks, UM>(p, n - q, mq, rc, memo, v, zq);
        if (p == tail) memo.base = 0;  // not the text's
        const uint64_t valid = v == 64 ? ~uint64_t(0) : (uint64_t(1) << v) - 1;
        const uint64_t stop = valid & (~lq | (rc == kRunLetters ? zq ^ in_zone : 0));
        if (stop) return q + unsigned(__builtin_ctzll(stop));
        if (v < 64) {  // the character at q + v is a wide digit or space (it ends the run) or was cut by the edge
            uint32_t len;
            utf8_decode(s, n, q + v, len);
            if (v + len <= 64) return q + v;
        }
        q += v;
    }
}

// The end of the piece at s[i] when the block there (masks m) holds no certain start and that piece is a letter run
// reaching the end of what the block knows; 0 when it is not such a run (the scalar splitter takes the block).
template <Family F, bool kMarks, Masks (*Classify)(const uint8_t*), Utf8MasksFn UM>
__attribute__((noinline)) size_t run_end(const uint8_t* s, size_t n, size_t i, const Masks& m, WideMemo& memo) {
    const uint8_t* b = s + i;
    if (b[0] == '\'') return 0;  // a contraction, or unknown to the block
    // deepseek-v3's `[PS][A-Za-z]+` (punctuation or a symbol, then ASCII letters only) comes before its letters
    const RunClass rc = F == kFamDsv3 && ps_then_ascii_letter(b, m, 0) ? kRunAscii : kRunLetters;
    unsigned v;
    uint64_t zone;
    const uint64_t lt = run_letters<F, kMarks, UM>(b, n - i, m, rc, memo, v, zone);
    const unsigned f = (lt & 1) ? 0 : utf8_char_len(b, n - i, 0);  // the prefix: one character at most
    if (v < f + 8) return 0;
    const uint64_t range = (v == 64 ? ~uint64_t(0) : (uint64_t(1) << v) - 1) & ~((uint64_t(1) << f) - 1);
    const uint64_t in_zone = (zone >> f) & 1 ? ~uint64_t(0) : 0;  // deepseek-v3: the run's zone, CJK or not
    if ((range & ~lt) || (range & (zone ^ in_zone))) return 0;
    return run_follow<F, kMarks, Classify, UM>(s, n, i + v, i + 64, rc, in_zone, memo);
}

// The o200k family's long letter runs: those of letters of both cases (\p{Lm}, \p{Lo}: Chinese, Japanese, Korean,
// Thai written without spaces, and the marks) after one character (a prefix, or a letter of either case). U* takes
// them all, W+ gives back the last: the piece ends at the first byte that is none of them, nor a letter of one case,
// nor an apostrophe that may start a contraction suffix. Where one of those two comes first, 0: the piece is the
// scalar's (one of both cases, then one case, can go either way). kLlama: llama.cpp's classes (every letter above
// ASCII is of both cases there, and a mark is no letter).
template <Family F, bool kLlama, Masks (*Classify)(const uint8_t*), Utf8MasksFn UM>
__attribute__((noinline)) size_t run_follow_o200k(const uint8_t* s, size_t n, size_t q, WideMemo& memo) {
    for (;;) {
        uint8_t tail[64];
        const uint8_t* p = window_at(s, n, q, tail);  // (past the text: no letters, so the end of the text ends it)
        const Masks mq = Classify(p);
        const Wide w = mq.hi ? classify_wide_o200k<kLlama, UM>(p, n - q, mq.hi, memo) : Wide{0, 0, 0, 0, 0, 64};
        if (p == tail) memo.base = 0;  // not the text's
        const unsigned v = w.cut;
        const uint64_t valid = v == 64 ? ~uint64_t(0) : (uint64_t(1) << v) - 1;
        const uint64_t stop = valid & ~w.x;
        if (stop) {
            const unsigned j = unsigned(__builtin_ctzll(stop));
            if ((((mq.l | w.letters) >> j) & 1) || (F == kFamO200k && p[j] == '\'')) return 0;
            return q + j;
        }
        if (v < 64) {  // a wide digit or space ends the run, or the character was cut by the edge
            uint32_t len;
            utf8_decode(s, n, q + v, len);
            if (v + len <= 64) return q + v;
        }
        q += v;
    }
}

template <Family F, bool kLlama, Masks (*Classify)(const uint8_t*), Utf8MasksFn UM>
__attribute__((noinline)) size_t run_end_o200k(const uint8_t* s, size_t n, size_t i, const Masks& m, WideMemo& memo) {
    if (!m.hi) return 0;
    const uint8_t* b = s + i;
    const Wide w = classify_wide_o200k<kLlama, UM>(b, n - i, m.hi, memo);
    const unsigned f = utf8_char_len(b, n - i, 0);  // the first character: a prefix, or a letter of any case
    if (w.cut < f + 8 || (F == kFamO200k && b[0] == '\'')) return 0;
    const uint64_t range = (w.cut == 64 ? ~uint64_t(0) : (uint64_t(1) << w.cut) - 1) & ~((uint64_t(1) << f) - 1);
    if (range & ~w.x) return 0;
    return run_follow_o200k<F, kLlama, Classify, UM>(s, n, i + w.cut, memo);
}

// A text's end shorter than this goes to the scalar splitter whole (a piece or two: a block would cost more).
constexpr size_t kTailBlockMin = 16;

template <Family F, int kGroup, bool kMarks, Masks (*Classify)(const uint8_t*), Utf8MasksFn UM>
BPE_INLINE size_t walk(Pretok kind, const uint8_t* s, size_t n, size_t* pos, size_t* ends, size_t max,
                       size_t* covered) {
    size_t i = *pos, k = 0;
    WideMemo memo;
    TailRun tail;
    while (i < n && k < max) {
        if (n - i >= 64 && max - k >= 64) {
            const Masks m = Classify(s + i);
            uint64_t bits = block_starts<F, kGroup, kMarks, UM>(s + i, n - i, m, memo, tail);
            if (bits) {
                const bool follow = bits & 1;
                bits &= ~uint64_t(1);
                while (bits) {
                    ends[k++] = i + unsigned(__builtin_ctzll(bits));
                    bits &= bits - 1;
                }
                if (follow)  // its last piece is a letter run past what it knows: followed to its end
                    ends[k++] = run_follow<F, kMarks, Classify, UM>(s, n, i + tail.known, i + 64, tail.rc, tail.in_zone,
                                                                memo);
                if (covered) *covered += ends[k - 1] - i;
                i = ends[k - 1];
                continue;
            }
            {  // a letter run longer than the block?
                const size_t e = F == kFamO200k || F == kFamO200kBare
                                     ? run_end_o200k<F, kMarks, Classify, UM>(s, n, i, m, memo)
                                     : run_end<F, kMarks, Classify, UM>(s, n, i, m, memo);
                if (e) {
                    ends[k++] = e;
                    if (covered) *covered += e - i;
                    i = e;
                    continue;
                }
            }
            // No certain start: scalar pieces until past the last non-ASCII byte of the block (at least one).
            // (Past the character that cut the block, where a wide digit or space did: text with fullwidth digits.)
            size_t stop = m.hi ? i + 64 - unsigned(__builtin_clzll(m.hi)) : i + 1;
            if (F != kFamO200k && F != kFamO200kBare && m.hi && memo.base == reinterpret_cast<uintptr_t>(s + i))
                stop = std::min(stop, i + memo.w.cut + 1);
            do {
                k += pretok_split_some(kind, s, n, &i, ends + k, 1);
            } while (i < stop && k < max);
            continue;
        }
        if (k && max - k < 64) break;  // the caller comes back with room for a whole block
        if (n - i >= kTailBlockMin && max - k >= 64) {
            // The text's last bytes, fewer than 64: one block over a zero-padded copy, whose knowledge ends at the
            // text's end as at a wide character's cut (block_starts: v <= avail); its certain starts are pieces, the
            // piece or two that reach the end go to the scalar splitter (text cut at added tokens, mpt's runs of
            // spaces, is mostly such short texts). Its own memo: the copy's classes are not the text's.
            alignas(64) uint8_t copy[64 + 16] = {};
            std::memcpy(copy, s + i, n - i);
            WideMemo own;
            const Masks m = Classify(copy);
            uint64_t bits = block_starts<F, kGroup, kMarks, UM>(copy, n - i, m, own, tail) & ~uint64_t(1);
            const size_t from = i;
            while (bits) {
                ends[k++] = from + unsigned(__builtin_ctzll(bits));
                bits &= bits - 1;
            }
            if (k && ends[k - 1] > from) {
                if (covered) *covered += ends[k - 1] - from;
                i = ends[k - 1];
            }
        }
        k += pretok_split_some(kind, s, n, &i, ends + k, max - k);
        break;
    }
    *pos = i;
    return k;
}

template <Family F, int kGroup, bool kMarks = false>
size_t walk_sse2(Pretok kind, const uint8_t* s, size_t n, size_t* pos, size_t* ends, size_t max, size_t* covered) {
    return walk<F, kGroup, kMarks, classify_sse2, utf8_masks_sse2>(kind, s, n, pos, ends, max, covered);
}

template <Family F, int kGroup, bool kMarks = false>
BPE_AVX2 size_t walk_avx2(Pretok kind, const uint8_t* s, size_t n, size_t* pos, size_t* ends, size_t max,
                          size_t* covered) {
    return walk<F, kGroup, kMarks, classify_avx2, utf8_masks_avx2>(kind, s, n, pos, ends, max, covered);
}

// The o200k family in a tier: the digit groups, contractions or none (Tekken), and o200k's letter classes or
// llama.cpp's (kLlama).
template <bool kLlama>
size_t walk_o200k(bool avx2, bool d1, bool bare, Pretok kind, const uint8_t* s, size_t n, size_t* pos,
                  size_t* ends, size_t max, size_t* covered) {
    if (avx2) {
        if (bare) return d1 ? walk_avx2<kFamO200kBare, 1, kLlama>(kind, s, n, pos, ends, max, covered)
                            : walk_avx2<kFamO200kBare, 3, kLlama>(kind, s, n, pos, ends, max, covered);
        return d1 ? walk_avx2<kFamO200k, 1, kLlama>(kind, s, n, pos, ends, max, covered)
                  : walk_avx2<kFamO200k, 3, kLlama>(kind, s, n, pos, ends, max, covered);
    }
    if (bare) return d1 ? walk_sse2<kFamO200kBare, 1, kLlama>(kind, s, n, pos, ends, max, covered)
                        : walk_sse2<kFamO200kBare, 3, kLlama>(kind, s, n, pos, ends, max, covered);
    return d1 ? walk_sse2<kFamO200k, 1, kLlama>(kind, s, n, pos, ends, max, covered)
              : walk_sse2<kFamO200k, 3, kLlama>(kind, s, n, pos, ends, max, covered);
}

// The cl100k family in a tier (pretok.h kFamilyBase): the block algebra depends only on the digit groups and on
// whether marks join letters. The contractions' case folding only matters where a non-ASCII character follows the
// apostrophe, which the block leaves to the scalar splitter; the two whitespace tails differ only where a run
// reaches the end of the text, which no block decides (a run that reaches the block's known part is left too).
size_t walk_family(unsigned bits, bool avx2, Pretok kind, const uint8_t* s, size_t n, size_t* pos, size_t* ends,
                   size_t max, size_t* covered) {
    const bool d3 = bits & kFamDigits3, marks = bits & kFamMarks;
    if (avx2) {
        if (d3) return marks ? walk_avx2<kFamCl100k, 3, true>(kind, s, n, pos, ends, max, covered)
                             : walk_avx2<kFamCl100k, 3, false>(kind, s, n, pos, ends, max, covered);
        return marks ? walk_avx2<kFamCl100k, 1, true>(kind, s, n, pos, ends, max, covered)
                     : walk_avx2<kFamCl100k, 1, false>(kind, s, n, pos, ends, max, covered);
    }
    if (d3) return marks ? walk_sse2<kFamCl100k, 3, true>(kind, s, n, pos, ends, max, covered)
                         : walk_sse2<kFamCl100k, 3, false>(kind, s, n, pos, ends, max, covered);
    return marks ? walk_sse2<kFamCl100k, 1, true>(kind, s, n, pos, ends, max, covered)
                 : walk_sse2<kFamCl100k, 1, false>(kind, s, n, pos, ends, max, covered);
}

bool use_avx2() {
    static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") &&
                            __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
    return yes;
}

}  // namespace

bool pretok_blocks_covers(Pretok kind) {
    return ascii_classes_match_tables() &&
           (kind == Pretok::kR50k || kind == Pretok::kDeepseekV3 || kind == Pretok::kR50kDigits ||
            pretok_o200k_bits(kind) >= 0 || pretok_family_bits(kind) >= 0);
}

const char* pretok_blocks_tier() { return use_avx2() ? "avx2" : "sse2"; }

size_t pretok_blocks_split_some_tier(Pretok kind, const uint8_t* text, size_t n, size_t* pos, size_t* ends, size_t max,
                                     const char* tier, size_t* covered) {
    if (!ascii_classes_match_tables()) return pretok_split_some(kind, text, n, pos, ends, max);
    const bool avx2 = tier[0] == 'a' ? use_avx2() : false;
    switch (kind) {
        case Pretok::kR50k:
            return avx2 ? walk_avx2<kFamR50k, 0>(kind, text, n, pos, ends, max, covered)
                        : walk_sse2<kFamR50k, 0>(kind, text, n, pos, ends, max, covered);
        case Pretok::kR50kDigits:
            return avx2 ? walk_avx2<kFamR50kDigits, 0>(kind, text, n, pos, ends, max, covered)
                        : walk_sse2<kFamR50kDigits, 0>(kind, text, n, pos, ends, max, covered);
        case Pretok::kDeepseekV3:
            return avx2 ? walk_avx2<kFamDsv3, 3>(kind, text, n, pos, ends, max, covered)
                        : walk_sse2<kFamDsv3, 3>(kind, text, n, pos, ends, max, covered);
        default: {
            if (const int b = pretok_o200k_bits(kind); b >= 0) {
                // the contraction's case folding matters only where a non-ASCII character follows the apostrophe
                // (left to the scalar); llama.cpp's letter classes differ from o200k's above ASCII alone
                const bool d1 = b & kO2Digits1, bare = !(b & (kO2Fold | kO2Ascii)), llama = b & kO2Llama;
                if (llama) return walk_o200k<true>(avx2, d1, bare, kind, text, n, pos, ends, max, covered);
                return walk_o200k<false>(avx2, d1, bare, kind, text, n, pos, ends, max, covered);
            }
            const int bits = pretok_family_bits(kind);
            if (bits >= 0) return walk_family(unsigned(bits), avx2, kind, text, n, pos, ends, max, covered);
            return pretok_split_some(kind, text, n, pos, ends, max);
        }
    }
}

size_t pretok_blocks_split_some(Pretok kind, const uint8_t* text, size_t n, size_t* pos, size_t* ends, size_t max) {
    return pretok_blocks_split_some_tier(kind, text, n, pos, ends, max, "auto", nullptr);
}

}  // namespace bpe

#else  // no x86-64 vector code here (yet): the scalar splitter throughout

namespace bpe {

bool pretok_blocks_covers(Pretok) { return false; }
const char* pretok_blocks_tier() { return "scalar"; }
size_t pretok_blocks_split_some_tier(Pretok kind, const uint8_t* text, size_t n, size_t* pos, size_t* ends, size_t max,
                                     const char*, size_t*) {
    return pretok_split_some(kind, text, n, pos, ends, max);
}
size_t pretok_blocks_split_some(Pretok kind, const uint8_t* text, size_t n, size_t* pos, size_t* ends, size_t max) {
    return pretok_split_some(kind, text, n, pos, ends, max);
}

}  // namespace bpe

#endif
