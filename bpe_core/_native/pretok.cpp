// Hand-written pre-tokenizers (see pretok.h): one "next piece" function per preset, each a transcription of its
// regex's ordered alternation. Notation in the comments: L N S = \p{L} \p{N} \s; O = [^\s\p{L}\p{N}] (marks and
// surrogates included); P = [^\r\n\p{L}\p{N}] (the optional one-character prefix of a letter run); U and W are
// o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}].
//
// Facts the transcription relies on (each checked by tests/native/test_native_pretok.py against `regex`):
// - a run of S ends at a non-S character or at the end, so `\s++$` matches exactly when the run reaches the end
//   (`$` also matches before a final "\n", but a possessive \s++ has taken that "\n" already);
// - `\s+(?!\S)` over a run [i, j): all of it when j is the end, else [i, j-1) when that is not empty, else nothing;
// - `\s*[\r\n]` and `\s*[\r\n]+` both end just after the last \r or \n of the run;
// - `[^\r\n\p{L}\p{N}]?\p{L}+` gives the same match whether `?` is possessive or not (a P character is not L);
// - o200k's `P?U*W+`: U* backtracks to the last position that starts a W character, see o200k_upper_lower.
#include "pretok.h"
#include "pretok_rx.h"
#include "utf8.h"

#include <stdexcept>
#include <string>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace bpe {

namespace {

// A character: its code point, its length in bytes, its class flags (utf8.h).
struct Ch {
    uint32_t cp;
    uint32_t len;
    uint8_t f;
};

// A character that is not ASCII, out of line so that `at` below stays small enough to be inlined everywhere: `at`
// was a call per character (16% of a warm cl100k encode's samples in `at` alone); inlined with its ASCII case, a
// warm 20 MB cl100k flat encode went from 0.278 to 0.236 s CPU (callgrind: -13% instructions).
__attribute__((noinline)) Ch at_multi(const uint8_t* s, size_t n, size_t i) {
    Ch c;
    c.cp = utf8_decode(s, n, i, c.len);
    c.f = flags_of(c.cp);
    return c;
}

// The character at s[i] (i < n).
__attribute__((always_inline)) inline Ch at(const uint8_t* s, size_t n, size_t i) {
    const uint8_t b = s[i];
    if (__builtin_expect(b < 0x80, 1)) return Ch{b, 1, kAsciiFlags[b]};
    return at_multi(s, n, i);
}

// End of the run of characters whose flags satisfy `pred`, from i.
template <class Pred>
inline size_t run_while(const uint8_t* s, size_t n, size_t i, Pred pred) {
    while (i < n) {
        const uint8_t b = s[i];
        if (b < 0x80) {
            if (!pred(kAsciiFlags[b])) break;
            ++i;
        } else {
            const Ch c = at(s, n, i);
            if (!pred(c.f)) break;
            i += c.len;
        }
    }
    return i;
}

// The end of a run of ASCII letters from i, 16 bytes at a time; it stops at the first byte that is not an ASCII
// letter (the caller goes on one character at a time where that byte is not ASCII).
inline size_t ascii_letters_end(const uint8_t* s, size_t n, size_t i) {
#if defined(__SSE2__)
    const __m128i bit5 = _mm_set1_epi8(0x20), a = _mm_set1_epi8('a'), flip = _mm_set1_epi8(char(0x80));
    const __m128i limit = _mm_set1_epi8(char(0x80 + 26));
    while (i + 16 <= n) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        // (b | 0x20) - 'a' < 26 (unsigned), as a signed compare after flipping the top bit; bytes >= 0x80 fail it
        const __m128i t = _mm_xor_si128(_mm_sub_epi8(_mm_or_si128(v, bit5), a), flip);
        const unsigned letters = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmplt_epi8(t, limit)));
        if (letters != 0xFFFF) return i + static_cast<size_t>(__builtin_ctz(~letters));
        i += 16;
    }
#endif
    while (i < n && s[i] < 0x80 && (kAsciiFlags[s[i]] & kFlagL)) ++i;
    return i;
}

// A run of \p{L} from i: ASCII letters a vector at a time (ascii_letters_end), then one character at a time from
// the first byte that is not one. Byte at a time, run_letters was 11.5% of a warm cl100k encode's instructions.
__attribute__((always_inline)) inline size_t run_letters(const uint8_t* s, size_t n, size_t i) {
    i = ascii_letters_end(s, n, i);
    if (i >= n || s[i] < 0x80) return i;
    return run_while(s, n, i, [](uint8_t f) { return (f & kFlagL) != 0; });
}
inline size_t run_digits(const uint8_t* s, size_t n, size_t i) {
    return run_while(s, n, i, [](uint8_t f) { return (f & kFlagN) != 0; });
}
inline size_t run_other(const uint8_t* s, size_t n, size_t i) { return run_while(s, n, i, flags_o); }

// \p{N}{1,max} from i (s[i] is N).
inline size_t digits_upto(const uint8_t* s, size_t n, size_t i, int max) {
    for (int k = 0; k < max && i < n; ++k) {
        const Ch c = at(s, n, i);
        if (!(c.f & kFlagN)) break;
        i += c.len;
    }
    return i;
}

// [\r\n]* (and '/' too for o200k) from i.
inline size_t run_crlf(const uint8_t* s, size_t n, size_t i, bool slash) {
    while (i < n && (s[i] == '\r' || s[i] == '\n' || (slash && s[i] == '/'))) ++i;
    return i;
}

// The whitespace run from i (s[i] starts an S character).
struct WsRun {
    size_t end;         // first position after the run
    size_t last_start;  // start of its last character
    size_t crlf_end;    // just after its last \r or \n, or 0 if it has none
};

inline WsRun ws_run(const uint8_t* s, size_t n, size_t i) {
    WsRun w{i, i, 0};
    while (i < n) {
        const Ch c = at(s, n, i);
        if (!(c.f & kFlagS)) break;
        w.last_start = i;
        i += c.len;
        if (c.f & kFlagCrLf) w.crlf_end = i;
    }
    w.end = i;
    return w;
}

// Masks of the contraction letters of the next two characters after position i (for the case-insensitive forms).
struct Ci2 {
    uint16_t m1, m2;
    size_t e1, e2;  // ends of the first and of the second character
};

inline Ci2 ci_two(const uint8_t* s, size_t n, size_t i) {
    Ci2 r{0, 0, i, i};
    if (i >= n) return r;
    const Ch c1 = at(s, n, i);
    r.m1 = ci_mask(c1.cp);
    r.e1 = r.e2 = i + c1.len;
    if (r.e1 < n) {
        const Ch c2 = at(s, n, r.e1);
        r.m2 = ci_mask(c2.cp);
        r.e2 = r.e1 + c2.len;
    }
    return r;
}

// r50k `'(?:[sdmt]|ll|ve|re)` at i (s[i] == '\''): its end, or 0.
inline size_t contraction_r50k(const uint8_t* s, size_t n, size_t i) {
    if (i + 1 >= n) return 0;
    const uint8_t a = s[i + 1];
    if (a == 's' || a == 'd' || a == 'm' || a == 't') return i + 2;
    if (i + 2 >= n) return 0;
    const uint8_t b = s[i + 2];
    if ((a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e')) return i + 3;
    return 0;
}

// llama.cpp's `'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]` at i (s[i] == '\''): ASCII letters only.
inline size_t contraction_llama(const uint8_t* s, size_t n, size_t i) {
    if (i + 1 >= n) return 0;
    const uint8_t a = s[i + 1] | 0x20;  // folds exactly the ASCII capitals onto the lower-case letters below
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 >= n) return 0;
    const uint8_t b = s[i + 2] | 0x20;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
}

// cl100k `'(?i:[sdmt]|ll|ve|re)` at i (s[i] == '\''), with regex's case folding: its end, or 0.
inline size_t contraction_cl100k(const uint8_t* s, size_t n, size_t i) {
    const Ci2 c = ci_two(s, n, i + 1);
    if (c.m1 & (kCiS | kCiD | kCiM | kCiT)) return c.e1;
    if (c.e2 == c.e1) return 0;
    if (((c.m1 & kCiL) && (c.m2 & kCiL)) || ((c.m1 & kCiV) && (c.m2 & kCiE)) || ((c.m1 & kCiR) && (c.m2 & kCiE)))
        return c.e2;
    return 0;
}

// o200k `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` at e: the end of the optional contraction (e itself when there is none).
size_t contraction_o200k_at(const uint8_t* s, size_t n, size_t e) {
    const Ch q = at(s, n, e);
    if (!(ci_mask(q.cp) & kCiApos)) return e;
    const Ci2 c = ci_two(s, n, e + q.len);
    if (c.m1 & (kCiS | kCiT)) return c.e1;
    if (c.e2 != c.e1 && (((c.m1 & kCiR) && (c.m2 & kCiE)) || ((c.m1 & kCiV) && (c.m2 & kCiE)))) return c.e2;
    if (c.m1 & kCiM) return c.e1;
    if (c.e2 != c.e1 && (c.m1 & kCiL) && (c.m2 & kCiL)) return c.e2;
    if (c.m1 & kCiD) return c.e1;
    return e;
}

// The same, with the common case (no apostrophe next: an ASCII character that is not one) inline.
inline size_t contraction_o200k(const uint8_t* s, size_t n, size_t e) {
    if (e >= n || (s[e] < 0x80 && !(kAsciiCi[s[e]] & kCiApos))) return e;
    return contraction_o200k_at(s, n, e);
}

// ------------------------------------------------------------------------------------------ r50k
// '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
__attribute__((always_inline)) inline size_t next_r50k(const uint8_t* s, size_t n, size_t i) {
    if (s[i] == '\'') {
        if (size_t e = contraction_r50k(s, n, i)) return e;
    }
    const Ch c = at(s, n, i);
    if (c.f & kFlagL) return run_letters(s, n, i + c.len);
    if (c.f & kFlagN) return run_digits(s, n, i + c.len);
    if (flags_o(c.f)) return run_other(s, n, i + c.len);
    if (s[i] == ' ' && i + 1 < n) {  // ` ?` then a run
        const Ch d = at(s, n, i + 1);
        if (d.f & kFlagL) return run_letters(s, n, i + 1 + d.len);
        if (d.f & kFlagN) return run_digits(s, n, i + 1 + d.len);
        if (flags_o(d.f)) return run_other(s, n, i + 1 + d.len);
    }
    const WsRun w = ws_run(s, n, i);
    if (w.end == n) return n;                     // \s++$
    if (w.last_start > i) return w.last_start;    // \s+(?!\S)
    return i + c.len;                             // \s
}

// ------------------------------------------------------------------------------------------ r50k-digits
// `\p{N}`, then '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|... on the text between the
// digits: every digit is a piece, and GPT-2's rules run on each fragment between them as on a text of its own (the
// same pieces as r50k's there, tests/native/test_native_pretok.py aliases), so a space is never the ` ?` of a digit
// and a whitespace run before a digit ends its fragment (`\s+(?!\S)` takes all of it).
__attribute__((always_inline)) inline size_t next_r50k_digits(const uint8_t* s, size_t n, size_t i) {
    const Ch c = at(s, n, i);
    if (c.f & kFlagN) return i + c.len;
    if (s[i] == '\'') {
        if (size_t e = contraction_r50k(s, n, i)) return e;
    }
    if (c.f & kFlagL) return run_letters(s, n, i + c.len);
    if (flags_o(c.f)) return run_other(s, n, i + c.len);
    if (s[i] == ' ' && i + 1 < n) {
        const Ch d = at(s, n, i + 1);
        if (d.f & kFlagL) return run_letters(s, n, i + 1 + d.len);
        if (flags_o(d.f)) return run_other(s, n, i + 1 + d.len);
    }
    const WsRun w = ws_run(s, n, i);
    if (w.end == n || (at(s, n, w.end).f & kFlagN)) return w.end;  // the run ends its fragment
    if (w.last_start > i) return w.last_start;                      // \s+(?!\S)
    return i + c.len;                                               // \s
}

// ------------------------------------------------------------------------------------------ o200k
// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
// \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+

// The end of a run of ASCII lower-case letters from i, 16 bytes at a time (as ascii_letters_end).
inline size_t ascii_lower_end(const uint8_t* s, size_t n, size_t i) {
#if defined(__SSE2__)
    const __m128i a = _mm_set1_epi8('a'), flip = _mm_set1_epi8(char(0x80)), limit = _mm_set1_epi8(char(0x80 + 26));
    while (i + 16 <= n) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        const __m128i t = _mm_xor_si128(_mm_sub_epi8(v, a), flip);
        const unsigned lower = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmplt_epi8(t, limit)));
        if (lower != 0xFFFF) return i + static_cast<size_t>(__builtin_ctz(~lower));
        i += 16;
    }
#endif
    while (i < n && s[i] >= 'a' && s[i] <= 'z') ++i;
    return i;
}

// The o200k family (pretok.h kO200kBase): kO2Llama gives llama.cpp's letter classes, `(?=[\p{L}])[^a-z]` and
// `(?=[\p{L}])[^A-Z]`: the same as o200k's on ASCII, every letter (and no mark) above it. The flags of a character
// as its member sees them: U and W recomputed from L above ASCII.
template <bool kLlama>
inline uint8_t o2_flags(uint32_t cp, uint8_t f) {
    if (!kLlama || cp < 0x80) return f;
    return uint8_t((f & ~(kFlagU | kFlagW)) | ((f & kFlagL) ? (kFlagU | kFlagW) : 0));
}

template <bool kLlama>
__attribute__((always_inline)) inline Ch at_o2(const uint8_t* s, size_t n, size_t i) {
    Ch c = at(s, n, i);
    c.f = o2_flags<kLlama>(c.cp, c.f);
    return c;
}

template <bool kLlama, class Pred>
inline size_t run_while_o2(const uint8_t* s, size_t n, size_t i, Pred pred) {
    if (!kLlama) return run_while(s, n, i, pred);
    while (i < n) {
        const Ch c = at_o2<true>(s, n, i);
        if (!pred(c.f)) break;
        i += c.len;
    }
    return i;
}

// The optional contraction after the letters, at e: o200k's `(?i:'s|...)?`, llama.cpp's ASCII `(?:'[sS]|...)?`, or
// none (Tekken).
template <unsigned kB>
inline size_t o2_contraction(const uint8_t* s, size_t n, size_t e) {
    if (kB & kO2Fold) return contraction_o200k(s, n, e);
    if (kB & kO2Ascii) {
        if (e < n && s[e] == '\'') {
            if (size_t c = contraction_llama(s, n, e)) return c;
        }
    }
    return e;
}

// o200k_upper_lower where the text at p is ASCII: the upper-case run, then the lower-case run (a vector at a time),
// carried on one character at a time where it reaches a byte that is not ASCII. Returns false where the upper-case
// run itself reaches such a byte (the caller takes the general path). The general path was 16% of a cold 5 MB o200k
// encode's instructions (callgrind), one character at a time; with this, 417.5 -> 405.3 M in all (-2.9%).
template <unsigned kB>
inline bool o200k_upper_lower_ascii(const uint8_t* s, size_t n, size_t p, size_t* end) {
    size_t q = p;
    while (q < n && s[q] >= 'A' && s[q] <= 'Z') ++q;
    if (q < n && s[q] >= 0x80) return false;
    if (q >= n || s[q] < 'a' || s[q] > 'z') {  // no W next, and no W among ASCII upper-case letters: no match
        *end = 0;
        return true;
    }
    size_t e = ascii_lower_end(s, n, q);
    if (e < n && s[e] >= 0x80)
        e = run_while_o2<bool(kB & kO2Llama)>(s, n, e, [](uint8_t f) { return (f & kFlagW) != 0; });
    *end = o2_contraction<kB>(s, n, e);
    return true;
}

// `U*W+` then the optional contraction, from p: its end, or 0. Greedy U* takes the whole U run [p, q); W+ then
// needs a W at q (it is not U: only a W that is not U can be there); else U* gives back characters until one that is
// also W comes next, and W+ takes from there to the end of the last W of the run (q is not W).
template <unsigned kB>
inline size_t o200k_upper_lower(const uint8_t* s, size_t n, size_t p) {
    constexpr bool kLlama = kB & kO2Llama;
    size_t fast;
    if (p < n && s[p] < 0x80 && ascii_classes_match_tables() && o200k_upper_lower_ascii<kB>(s, n, p, &fast))
        return fast;
    size_t q = p, last_w_end = 0;
    uint8_t fq = 0;
    while (q < n) {
        const Ch c = at_o2<kLlama>(s, n, q);
        fq = c.f;
        if (!(c.f & kFlagU)) break;
        q += c.len;
        if (c.f & kFlagW) last_w_end = q;
    }
    size_t e;
    if (q < n && (fq & kFlagW))
        e = run_while_o2<kLlama>(s, n, q, [](uint8_t f) { return (f & kFlagW) != 0; });
    else if (last_w_end)
        e = last_w_end;
    else
        return 0;
    return o2_contraction<kB>(s, n, e);
}

// `U+W*` then the optional contraction, from p: its end, or 0.
template <unsigned kB>
inline size_t o200k_upper_then_lower(const uint8_t* s, size_t n, size_t p) {
    constexpr bool kLlama = kB & kO2Llama;
    const size_t q = run_while_o2<kLlama>(s, n, p, [](uint8_t f) { return (f & kFlagU) != 0; });
    if (q == p) return 0;
    return o2_contraction<kB>(s, n, run_while_o2<kLlama>(s, n, q, [](uint8_t f) { return (f & kFlagW) != 0; }));
}

template <unsigned kB>
__attribute__((always_inline)) inline size_t next_o200k(const uint8_t* s, size_t n, size_t i) {
    const Ch c = at_o2<bool(kB & kO2Llama)>(s, n, i);
    const bool prefix = flags_p(c.f) && i + c.len < n;
    if (prefix) {
        if (size_t e = o200k_upper_lower<kB>(s, n, i + c.len)) return e;
    }
    if (c.f & (kFlagU | kFlagW)) {
        if (size_t e = o200k_upper_lower<kB>(s, n, i)) return e;
    }
    if (prefix) {
        if (size_t e = o200k_upper_then_lower<kB>(s, n, i + c.len)) return e;
    }
    if (c.f & kFlagU) {
        if (size_t e = o200k_upper_then_lower<kB>(s, n, i)) return e;
    }
    if (c.f & kFlagN) return digits_upto(s, n, i, (kB & kO2Digits1) ? 1 : 3);
    if (flags_o(c.f)) return run_crlf(s, n, run_other(s, n, i + c.len), true);
    if (s[i] == ' ' && i + 1 < n) {
        const Ch d = at(s, n, i + 1);
        if (flags_o(d.f)) return run_crlf(s, n, run_other(s, n, i + 1 + d.len), true);
    }
    const WsRun w = ws_run(s, n, i);
    if (w.crlf_end) return w.crlf_end;          // \s*[\r\n]+
    if (w.end == n) return n;                   // \s+(?!\S) at the end
    if (w.last_start > i) return w.last_start;  // \s+(?!\S)
    return w.end;                               // \s+
}

// ------------------------------------------------------------------------------------------ the cl100k family
// C|[^\r\n\p{L}\p{N}]?X+|D| ?O+[\r\n]*|T (pretok.h, kFamilyBase): cl100k is
// '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s,
// llama3 (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+, qwen2 the same with \p{N}, Qwen 3.5 that with [\p{L}\p{M}]+ and
//  ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*. With marks joining letters, a mark is never P's character: X takes it first.


template <bool kMarks>
inline bool flags_x(uint8_t f) {
    return (f & kFlagL) || (kMarks && flags_mark(f));
}

template <bool kMarks>
inline bool flags_ox(uint8_t f) {
    return flags_o(f) && !(kMarks && flags_mark(f));
}

template <bool kMarks>
__attribute__((always_inline)) inline size_t run_x(const uint8_t* s, size_t n, size_t i) {
    if (!kMarks) return run_letters(s, n, i);
    i = ascii_letters_end(s, n, i);
    if (i >= n || s[i] < 0x80) return i;
    return run_while(s, n, i, flags_x<true>);
}

template <unsigned kBits>
__attribute__((always_inline)) inline size_t next_family(const uint8_t* s, size_t n, size_t i) {
    constexpr bool kFold = kBits & kFamFold, kMarks = kBits & kFamMarks, kClWs = kBits & kFamClWs;
    constexpr int kMaxDigits = (kBits & kFamDigits3) ? 3 : 1;
    if (s[i] == '\'') {
        if (size_t e = kFold ? contraction_cl100k(s, n, i) : contraction_llama(s, n, i)) return e;
    }
    const Ch c = at(s, n, i);
    if (flags_x<kMarks>(c.f)) return run_x<kMarks>(s, n, i + c.len);
    if (flags_p(c.f) && i + c.len < n) {
        const Ch d = at(s, n, i + c.len);
        if (flags_x<kMarks>(d.f)) return run_x<kMarks>(s, n, i + c.len + d.len);
    }
    if (c.f & kFlagN) return digits_upto(s, n, i, kMaxDigits);
    if (flags_ox<kMarks>(c.f)) return run_crlf(s, n, run_while(s, n, i + c.len, flags_ox<kMarks>), false);
    if (s[i] == ' ' && i + 1 < n) {
        const Ch d = at(s, n, i + 1);
        if (flags_ox<kMarks>(d.f)) return run_crlf(s, n, run_while(s, n, i + 1 + d.len, flags_ox<kMarks>), false);
    }
    const WsRun w = ws_run(s, n, i);
    if (kClWs) {
        if (w.end == n) return n;                   // \s++$
        if (w.crlf_end) return w.crlf_end;          // \s*[\r\n]
        if (w.last_start > i) return w.last_start;  // \s+(?!\S)
        return i + c.len;                           // \s
    }
    if (w.crlf_end) return w.crlf_end;          // \s*[\r\n]+
    if (w.end == n) return n;                   // \s+(?!\S) at the end
    if (w.last_start > i) return w.last_start;  // \s+(?!\S)
    return w.end;                               // \s+
}

constexpr unsigned kBitsCl100k = kFamFold | kFamDigits3 | kFamClWs, kBitsLlama3 = kFamDigits3, kBitsQwen2 = 0;

// ------------------------------------------------------------------------------------------ deepseek-v3
// llama.cpp's cascade: (1) \p{N}{1,3}; (2) [一-龥\u3040-ゟ゠-ヿ]+ on what (1) left; (3) on each fragment then left,
// [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+; the text between two matches of a regex is a piece too. So every digit group is a piece
// (no later rule matches inside digits), and the rest is cut into fragments of one zone each, the CJK ranges of (2) or
// the others, which (3) splits as texts of their own: no run, lookahead or optional next character reaches into
// another zone or a digit, and `\s+(?!\S)` takes a whole run that ends a fragment. A piece start tells its zone (the
// zone of its first character), so each piece is found from its start alone.
inline bool flags_lm(uint8_t f) { return (f & kFlagL) || flags_mark(f); }
inline bool dsv3_prefix(uint8_t f) { return !(f & (kFlagCrLf | kFlagL | kFlagPS)); }  // [^\r\n\p{L}\p{P}\p{S}]

// The end of the run from j of characters of the zone (`cjk`) that satisfy pred.
template <class Pred>
inline size_t dsv3_run(const uint8_t* s, size_t n, size_t j, bool cjk, Pred pred) {
    while (j < n) {
        const Ch d = at(s, n, j);
        if ((d.f & kFlagN) || dsv3_cjk(d.cp) != cjk || !pred(d.f)) break;
        j += d.len;
    }
    return j;
}

// Whether a match of (3) starts at e (in the zone), the character after it being at j.
inline bool dsv3_match_starts(const uint8_t* s, size_t n, const Ch& e, size_t j, bool cjk) {
    if (flags_lm(e.f) || (e.f & (kFlagPS | kFlagS))) return true;
    if (!dsv3_prefix(e.f) || j >= n) return false;
    const Ch g = at(s, n, j);
    return !(g.f & kFlagN) && dsv3_cjk(g.cp) == cjk && flags_lm(g.f);
}

inline size_t next_deepseek_v3(const uint8_t* s, size_t n, size_t i) {
    const Ch c = at(s, n, i);
    if (c.f & kFlagN) return digits_upto(s, n, i, 3);
    const bool cjk = dsv3_cjk(c.cp);
    const size_t i1 = i + c.len;
    // [ASCII punctuation][A-Za-z]+ (both in the other zone)
    if (c.cp < 0x80 && (c.f & kFlagPS) && i1 < n && s[i1] < 0x80 && (kAsciiFlags[s[i1]] & kFlagL))
        return ascii_letters_end(s, n, i1);
    if (flags_lm(c.f)) return dsv3_run(s, n, i1, cjk, flags_lm);
    Ch d{0, 0, 0};
    bool next_same = false;
    if (i1 < n) {
        d = at(s, n, i1);
        next_same = !(d.f & kFlagN) && dsv3_cjk(d.cp) == cjk;
    }
    if (dsv3_prefix(c.f) && next_same && flags_lm(d.f)) return dsv3_run(s, n, i1 + d.len, cjk, flags_lm);
    auto ps = [](uint8_t f) { return (f & kFlagPS) != 0; };
    if (c.f & kFlagPS) {
        const size_t e = dsv3_run(s, n, i1, cjk, ps);
        return cjk ? e : run_crlf(s, n, e, false);  // \r and \n are of the other zone
    }
    if (s[i] == ' ' && next_same && (d.f & kFlagPS)) return run_crlf(s, n, dsv3_run(s, n, i1 + d.len, cjk, ps), false);
    if (c.f & kFlagS) {  // whitespace is of the other zone, as every character a run of it stops at but digits and CJK
        const WsRun w = ws_run(s, n, i);
        if (w.crlf_end) return w.crlf_end;  // \s*[\r\n]+
        if (w.end == n) return n;           // \s+(?!\S) at the end of the fragment ...
        const Ch e = at(s, n, w.end);
        if ((e.f & kFlagN) || dsv3_cjk(e.cp)) return w.end;  // ... which a digit or a CJK character starts
        if (w.last_start > i) return w.last_start;           // \s+(?!\S)
        return w.end;                                        // \s+
    }
    // No alternative matches here: the text up to where one does (or the fragment ends) is a piece.
    size_t j = i1;
    while (j < n) {
        const Ch e = at(s, n, j);
        if ((e.f & kFlagN) || dsv3_cjk(e.cp) != cjk || dsv3_match_starts(s, n, e, j + e.len, cjk)) break;
        j += e.len;
    }
    return j;
}

template <size_t (*Next)(const uint8_t*, size_t, size_t)>
void split_with(const uint8_t* s, size_t n, std::vector<size_t>& ends) {
    size_t i = 0;
    while (i < n) {
        i = Next(s, n, i);
        ends.push_back(i);
    }
}

// Up to `max` pieces from *pos into ends[] (a fixed array the caller keeps in L1): the encoder consumes them in
// batches instead of a vector of every piece of the text (push_back's capacity check per piece, and a second pass
// over memory that had left the cache for long texts). With the vector run of ASCII letters and flat.h's IdBuffer
// (no zero fill): the second 2 MB pass (cl100k, callgrind) 108.9 -> 95.6 M instructions; then with next_* and
// run_letters forced inline and the encoder's hot probe inline (Encoder::encode_text_to): 79.7 M.
template <size_t (*Next)(const uint8_t*, size_t, size_t)>
size_t split_some_with(const uint8_t* s, size_t n, size_t* pos, size_t* ends, size_t max) {
    size_t i = *pos, k = 0;
    while (i < n && k < max) {
        i = Next(s, n, i);
        ends[k++] = i;
    }
    *pos = i;
    return k;
}

// The twelve members of the o200k family (pretok.h kO200kBase): no contraction bits 6.
#define BPE_O2_CASES                                                                                              \
    BPE_O2_CASE(0) BPE_O2_CASE(1) BPE_O2_CASE(2) BPE_O2_CASE(3) BPE_O2_CASE(4) BPE_O2_CASE(5) BPE_O2_CASE(8)        \
    BPE_O2_CASE(9) BPE_O2_CASE(10) BPE_O2_CASE(11) BPE_O2_CASE(12) BPE_O2_CASE(13)

// The sixteen members of the cl100k family, one `case` each.
#define BPE_FAMILY_CASES                                                                                           \
    BPE_FAMILY_CASE(0) BPE_FAMILY_CASE(1) BPE_FAMILY_CASE(2) BPE_FAMILY_CASE(3) BPE_FAMILY_CASE(4) BPE_FAMILY_CASE(5) \
    BPE_FAMILY_CASE(6) BPE_FAMILY_CASE(7) BPE_FAMILY_CASE(8) BPE_FAMILY_CASE(9) BPE_FAMILY_CASE(10)                  \
    BPE_FAMILY_CASE(11) BPE_FAMILY_CASE(12) BPE_FAMILY_CASE(13) BPE_FAMILY_CASE(14) BPE_FAMILY_CASE(15)

}  // namespace

static int family_bits_or_throw(Pretok kind) {
    const int bits = pretok_family_bits(kind);
    if (bits < 0) throw std::invalid_argument("pretok_split: no hand-written pre-tokenizer for this kind");
    return bits;
}

size_t pretok_split_some(Pretok kind, const uint8_t* text, size_t n, size_t* pos, size_t* ends, size_t max) {
    if (rx_is(kind)) return rx_split_some(kind, text, n, pos, ends, max);  // a compiled pattern (pretok_rx.cpp)
    if (kind == Pretok::kR50k) return split_some_with<next_r50k>(text, n, pos, ends, max);
    if (const int b = pretok_o200k_bits(kind); b >= 0) {
        switch (b) {
#define BPE_O2_CASE(b) \
    case b: return split_some_with<next_o200k<b>>(text, n, pos, ends, max);
            BPE_O2_CASES
#undef BPE_O2_CASE
        }
    }
    if (kind == Pretok::kDeepseekV3) return split_some_with<next_deepseek_v3>(text, n, pos, ends, max);
    if (kind == Pretok::kR50kDigits) return split_some_with<next_r50k_digits>(text, n, pos, ends, max);
    switch (family_bits_or_throw(kind)) {
#define BPE_FAMILY_CASE(b) \
    case b: return split_some_with<next_family<b>>(text, n, pos, ends, max);
        BPE_FAMILY_CASES
#undef BPE_FAMILY_CASE
    }
    throw std::invalid_argument("pretok_split: no hand-written pre-tokenizer for this kind");
}

Pretok pretok_family(unsigned bits) {
    if (bits >= kFamBits) return Pretok::kNone;
    if (bits == kBitsCl100k) return Pretok::kCl100k;
    if (bits == kBitsLlama3) return Pretok::kLlama3;
    if (bits == kBitsQwen2) return Pretok::kQwen2;
    return static_cast<Pretok>(kFamilyBase + int(bits));
}

Pretok pretok_o200k(unsigned bits) {
    if (bits >= kO2Bits || (bits & (kO2Fold | kO2Ascii)) == (kO2Fold | kO2Ascii)) return Pretok::kNone;
    if (bits == kO2Fold) return Pretok::kO200k;
    return static_cast<Pretok>(kO200kBase + int(bits));
}

int pretok_o200k_bits(Pretok kind) {
    if (kind == Pretok::kO200k) return kO2Fold;
    const int k = static_cast<int>(kind) - kO200kBase;
    return k >= 0 && k < int(kO2Bits) && pretok_o200k(unsigned(k)) == kind ? k : -1;
}

int pretok_family_bits(Pretok kind) {
    if (kind == Pretok::kCl100k) return kBitsCl100k;
    if (kind == Pretok::kLlama3) return kBitsLlama3;
    if (kind == Pretok::kQwen2) return kBitsQwen2;
    const int k = static_cast<int>(kind) - kFamilyBase;
    return k >= 0 && k < int(kFamBits) && pretok_family(unsigned(k)) == kind ? k : -1;
}

namespace {

std::string o200k_name(unsigned bits) {
    return std::string("o200k-family:") + (bits & kO2Llama ? "L" : "UW") +
           (bits & kO2Fold ? "-ci" : bits & kO2Ascii ? "-ascii" : "-none") + (bits & kO2Digits1 ? "-d1" : "-d3");
}

std::string family_name(unsigned bits) {
    return std::string("family:") + (bits & kFamFold ? "ci" : "ascii") + (bits & kFamDigits3 ? "-d3" : "-d1") +
           (bits & kFamMarks ? "-LM" : "-L") + (bits & kFamClWs ? "-cl100k" : "-llama");
}

// (name, kind) of every hand-written kind, in pretok_names' order.
const std::vector<std::pair<std::string, Pretok>>& named_kinds() {
    static const std::vector<std::pair<std::string, Pretok>> kinds = [] {
        std::vector<std::pair<std::string, Pretok>> v{{"r50k", Pretok::kR50k},
                                                      {"cl100k", Pretok::kCl100k},
                                                      {"o200k", Pretok::kO200k},
                                                      {"llama3", Pretok::kLlama3},
                                                      {"qwen2", Pretok::kQwen2},
                                                      {"deepseek-v3", Pretok::kDeepseekV3},
                                                      {"r50k-digits", Pretok::kR50kDigits}};
        for (unsigned b = 0; b < kFamBits; ++b)
            if (static_cast<int>(pretok_family(b)) >= kFamilyBase) v.emplace_back(family_name(b), pretok_family(b));
        for (unsigned b = 0; b < kO2Bits; ++b)
            if (static_cast<int>(pretok_o200k(b)) >= kO200kBase) v.emplace_back(o200k_name(b), pretok_o200k(b));
        return v;
    }();
    return kinds;
}

}  // namespace

const std::vector<std::string_view>& pretok_names() {
    static const std::vector<std::string_view> names = [] {
        std::vector<std::string_view> v;
        for (const auto& [name, kind] : named_kinds()) v.emplace_back(name);
        return v;
    }();
    return names;
}

Pretok pretok_named(size_t index) {
    return index < named_kinds().size() ? named_kinds()[index].second : Pretok::kNone;
}

Pretok pretok_from_name(std::string_view name) {
    for (const auto& [known, kind] : named_kinds())
        if (known == name) return kind;
    return rx_from_name(name);
}

void pretok_split(Pretok kind, const uint8_t* text, size_t n, std::vector<size_t>& ends) {
    if (rx_is(kind)) return rx_split(kind, text, n, ends);
    if (kind == Pretok::kR50k) return split_with<next_r50k>(text, n, ends);
    if (const int b = pretok_o200k_bits(kind); b >= 0) {
        switch (b) {
#define BPE_O2_CASE(b) \
    case b: return split_with<next_o200k<b>>(text, n, ends);
            BPE_O2_CASES
#undef BPE_O2_CASE
        }
    }
    if (kind == Pretok::kDeepseekV3) return split_with<next_deepseek_v3>(text, n, ends);
    if (kind == Pretok::kR50kDigits) return split_with<next_r50k_digits>(text, n, ends);
    switch (family_bits_or_throw(kind)) {
#define BPE_FAMILY_CASE(b) \
    case b: return split_with<next_family<b>>(text, n, ends);
        BPE_FAMILY_CASES
#undef BPE_FAMILY_CASE
    }
    throw std::invalid_argument("pretok_split: no hand-written pre-tokenizer for this kind");
}

const char* pretok_regex_version() { return kRegexVersion; }
const char* pretok_unicode_version() { return kUnicodeVersion; }
const char* pretok_tables_digest() { return kTablesDigest; }

}  // namespace bpe
