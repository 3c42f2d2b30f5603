// Characters, once for every splitter (pretok.cpp, pretok_blocks.cpp, pretok_rx.cpp) and the Arrow validation
// (flat.h): the strict UTF-8 decoder, and the Unicode class flags of a code point read from the generated tables
// (gen_unicode_tables.py: unicode_tables.h declares them, unicode_tables.cpp is the one translation unit that holds
// them).
//
// Strict as CPython decodes: no overlong forms, no surrogates, nothing above U+10FFFF. A byte that starts no valid
// sequence is one character, the lone surrogate U+DC00+byte that surrogateescape gives it (category Cs), so bytes
// input splits as its surrogateescape-decoded str does in the reference.
#pragma once

#include <cstddef>
#include <cstdint>

#include "unicode_tables.h"

namespace bpe {

// The code point of the character at s[i] (i < n, s[i] >= 0x80 or not), its length in bytes in len: a valid
// sequence of 2-4 bytes, or 1 for an ASCII byte and for a byte that starts none (then U+DC00+byte).
inline uint32_t utf8_decode(const uint8_t* s, size_t n, size_t i, uint32_t& len) {
    const uint8_t b0 = s[i];
    const size_t rem = n - i;
    if (b0 < 0x80) {
        len = 1;
        return b0;
    }
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        if (rem >= 2 && (s[i + 1] & 0xC0) == 0x80) {
            len = 2;
            return (uint32_t(b0 & 0x1F) << 6) | (s[i + 1] & 0x3F);
        }
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        const uint8_t lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
        if (rem >= 3 && s[i + 1] >= lo && s[i + 1] <= hi && (s[i + 2] & 0xC0) == 0x80) {
            len = 3;
            return (uint32_t(b0 & 0x0F) << 12) | (uint32_t(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
        }
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        const uint8_t lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
        if (rem >= 4 && s[i + 1] >= lo && s[i + 1] <= hi && (s[i + 2] & 0xC0) == 0x80 && (s[i + 3] & 0xC0) == 0x80) {
            len = 4;
            return (uint32_t(b0 & 0x07) << 18) | (uint32_t(s[i + 1] & 0x3F) << 12) | (uint32_t(s[i + 2] & 0x3F) << 6) |
                   (s[i + 3] & 0x3F);
        }
    }
    len = 1;
    return 0xDC00u + b0;
}

// The length of the character at s[i]: 1 for ASCII without decoding, else utf8_decode's.
inline uint32_t utf8_char_len(const uint8_t* s, size_t n, size_t i) {
    if (s[i] < 0x80) return 1;
    uint32_t len;
    utf8_decode(s, n, i, len);
    return len;
}

// The offset of the first byte of s[0:n] that is not part of a valid sequence, or n. Eight ASCII bytes at a time
// (text is mostly ASCII).
inline size_t utf8_first_invalid(const uint8_t* s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            __builtin_memcpy(&w, s + i, 8);
            if ((w & 0x8080808080808080ull) == 0) {
                i += 8;
                continue;
            }
        }
        uint32_t len;
        utf8_decode(s, n, i, len);
        if (len == 1 && s[i] >= 0x80) return i;  // a valid sequence that starts with a byte >= 0x80 has 2-4 bytes
        i += len;
    }
    return n;
}

// ------------------------------------------------------------------------------------------ class flags

// Flag bits of a code point (bpe_core/pretokenize/unicode_tables.py FLAGS and CR_LF): \p{L}, \p{N}, \s, o200k's
// "upper-ish" [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and "lower-ish" [\p{Ll}\p{Lm}\p{Lo}\p{M}], \r or \n, and
// [\p{P}\p{S}].
// kFlagPS: [\p{P}\p{S}] (deepseek-v3).
enum : uint8_t { kFlagL = 1, kFlagN = 2, kFlagS = 4, kFlagU = 8, kFlagW = 16, kFlagCrLf = 32, kFlagPS = 64 };
// Case-insensitive contraction letters (unicode_tables.py CI_LETTERS order): regex's (?i) folds U+017F onto s, so
// these come from the tables too.
enum : uint16_t {
    kCiS = 1,
    kCiD = 2,
    kCiM = 4,
    kCiT = 8,
    kCiL = 16,
    kCiV = 32,
    kCiR = 64,
    kCiE = 128,
    kCiApos = 256,
};

inline uint8_t flags_of(uint32_t cp) {
    return kStage2[(size_t(kStage1[cp >> kBlockShift]) << kBlockShift) | (cp & ((1u << kBlockShift) - 1))];
}

inline uint16_t ci_mask(uint32_t cp) {
    if (cp < 128) return kAsciiCi[cp];
    for (unsigned k = 0; k < kOtherCiCount; ++k)
        if (kOtherCiCp[k] == cp) return kOtherCiMask[k];
    return 0;
}

// A mark (\p{M}): in both of o200k's classes, which hold every mark, and not a letter (unicode_tables.py checks
// [\p{L}\p{M}] against these bits on every code point).
inline bool flags_mark(uint8_t f) { return (f & (kFlagU | kFlagW | kFlagL)) == (kFlagU | kFlagW); }
// DeepSeek V3's second regex, [一-龥\u3040-ゟ゠-ヿ]: U+4E00-U+9FA5, U+3040-U+30FF.
inline bool dsv3_cjk(uint32_t cp) { return (cp - 0x3040u) <= 0xBFu || (cp - 0x4E00u) <= 0x51A5u; }

inline bool flags_o(uint8_t f) { return !(f & (kFlagS | kFlagL | kFlagN)); }     // [^\s\p{L}\p{N}]
inline bool flags_p(uint8_t f) { return !(f & (kFlagCrLf | kFlagL | kFlagN)); }  // [^\r\n\p{L}\p{N}]

// True when the tables give every ASCII byte the class that byte arithmetic computes (L = A-Z a-z, N = 0-9,
// S = 9-13 and 32, CR/LF = 13 and 10; o200k's U = A-Z, W = a-z): the vector code of the splitters relies on it, so
// it is checked once rather than assumed; where it is false they take their scalar paths.
inline bool ascii_classes_match_tables() {
    static const bool ok = [] {
        for (int b = 0; b < 128; ++b) {
            const uint8_t f = kAsciiFlags[b];
            const bool l = (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z'), d = b >= '0' && b <= '9';
            const bool s = (b >= 9 && b <= 13) || b == ' ', nl = b == '\r' || b == '\n';
            const bool up = b >= 'A' && b <= 'Z', lo = b >= 'a' && b <= 'z';
            if (bool(f & kFlagL) != l || bool(f & kFlagN) != d || bool(f & kFlagS) != s || bool(f & kFlagCrLf) != nl ||
                bool(f & kFlagU) != up || bool(f & kFlagW) != lo)
                return false;
        }
        return true;
    }();
    return ok;
}

}  // namespace bpe
