// Hand-written pre-tokenizers: the exact pieces of the built-in preset regexes (r50k, cl100k, o200k, llama3,
// qwen2), without a regex engine. Any other pattern keeps using the `regex` module in Python.
//
// Input is UTF-8 bytes. A byte that does not start a valid UTF-8 sequence (strict decoding, as CPython's) counts as
// one character of category Cs, exactly as the lone surrogate that Python's surrogateescape gives it: so bytes input
// splits as its surrogateescape-decoded str does in the reference. The Unicode property tables are generated at build
// time from the `regex` module (gen_unicode_tables.py), so both agree on every code point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace bpe {

// kDeepseekV3: llama.cpp's three-regex cascade of DeepSeek V3 (`\p{N}{1,3}`, then `[一-龥\u3040-ゟ゠-ヿ]+`, then its
// main rule on each fragment the two leave), with cl100k's ranks the Deepseek V3 vocabulary.
// kR50kDigits: `\p{N}` then GPT-2's regex on what it leaves (llama.cpp's starcoder, refact, command-r, smollm,
// exaone, codeshell).
enum class Pretok : int {
    kNone = -1,
    kR50k = 0,
    kCl100k = 1,
    kO200k = 2,
    kLlama3 = 3,
    kQwen2 = 4,
    kDeepseekV3 = 5,
    kR50kDigits = 6,
};

// The cl100k family (issue 31): the split of `C|[^\r\n\p{L}\p{N}]?X+|D| ?O+[\r\n]*|T` with four parameters, one bit
// each of kind - kFamilyBase: C the contractions, case-folded as cl100k's `(?i:...)` (bit 0) or ASCII-only as
// llama.cpp's `'[sS]|...` (0); D `\p{N}{1,3}` (bit 1) or `\p{N}`; X `\p{L}` or `[\p{L}\p{M}]` (bit 2: marks join
// letters, as Qwen 3.5; O is then `[^\s\p{L}\p{M}\p{N}]`); T the whitespace tail `\s++$|\s*[\r\n]|\s+(?!\S)|\s`
// (bit 3, cl100k's) or `\s*[\r\n]+|\s+(?!\S)|\s+` (llama.cpp's). Three of the sixteen are presets (cl100k, llama3,
// qwen2) and are named by them: pretok_family gives the preset's kind for those bits.
constexpr int kFamilyBase = 16;
enum : unsigned { kFamFold = 1, kFamDigits3 = 2, kFamMarks = 4, kFamClWs = 8, kFamBits = 16 };
Pretok pretok_family(unsigned bits);
// Its bits, or -1 when `kind` is not of the cl100k family.
int pretok_family_bits(Pretok kind);

// The o200k family: `P?U*W+C?|P?U+W*C?|D| ?O+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+` with U, W o200k's classes or
// llama.cpp's (`(?=[\p{L}])[^a-z]`, `(?=[\p{L}])[^A-Z]`: kO2Llama), the contraction suffix C case-folded (kO2Fold,
// o200k's), ASCII (kO2Ascii, llama.cpp's gpt-4o) or none (Tekken), D `\p{N}{1,3}` or `\p{N}` (kO2Digits1). Twelve
// members (fold and ASCII exclude each other), o200k one of them.
constexpr int kO200kBase = 40;
enum : unsigned { kO2Llama = 1, kO2Fold = 2, kO2Ascii = 4, kO2Digits1 = 8, kO2Bits = 16 };
Pretok pretok_o200k(unsigned bits);
int pretok_o200k_bits(Pretok kind);

// The kind named `name` (a preset's name, a family's as pretok_names gives it, or a compiled pattern's "rx:N"), or
// kNone.
Pretok pretok_from_name(std::string_view name);
// The names of the hand-written kinds, the five presets first, deepseek-v3, r50k-digits, then the other thirteen of
// the cl100k family ("family:ci-d3-LM-llama": contractions ci or ascii, digits d3 or d1, letters L or LM, tail cl100k
// or llama), then the other eleven of the o200k family ("o200k-family:L-none-d1": classes UW or L, contractions ci,
// ascii or none, digits d3 or d1).
const std::vector<std::string_view>& pretok_names();
// The kind pretok_names()[index] names, or kNone past the end (a compiled cascade's hand-written stage).
Pretok pretok_named(size_t index);

// Append the end offset (in bytes, exclusive) of each piece of text[0:n] to `ends`; the pieces tile the text, none is
// empty. Pure function of its input: safe to call from many threads at once.
void pretok_split(Pretok kind, const uint8_t* text, size_t n, std::vector<size_t>& ends);

// The next pieces of text[0:n] from *pos: at most `max` end offsets written to `ends`, *pos moved to the last; returns
// how many (0 only at the end of the text). Successive calls give pretok_split's pieces.
size_t pretok_split_some(Pretok kind, const uint8_t* text, size_t n, size_t* pos, size_t* ends, size_t max);

// The `regex` version and the Unicode version (unicodedata.unidata_version) the property tables were generated from.
const char* pretok_regex_version();
const char* pretok_unicode_version();
// sha256 of the tables (bpe_core/pretokenize/unicode_tables.py digest): equal digests, equal splits.
const char* pretok_tables_digest();

}  // namespace bpe
