// A str's code units to UTF-8, many at a time: the wide tier of batch.h's transcode (issue 37, item 3).
//
// Non-Latin text (Cyrillic, Greek, CJK, kana: CPython's UCS-2 strs; accented Latin: UCS-1) was transcoded one code
// unit at a time, 8.6 instructions per byte of UTF-8 (callgrind, deepseek-v3 on Japanese: 15% of a warm call). With
// AVX-512 VBMI2 a step takes 16 UCS-2 or 32 UCS-1 units: each unit's UTF-8 is built in a lane of its own (4 bytes
// for UCS-2, 2 for UCS-1), and one byte compress (vpcompressb) packs the bytes that belong to it. Chosen once by CPU
// detection; the scalar loop is the other tier (transcode_set_tier forces it: tests compare both).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace bpe {

// Extra bytes a destination must have past the UTF-8 a wide step writes (it stores whole 64-byte vectors).
constexpr size_t kTranscodeSlack = 64;

// How many units of s[i:n] the wide tier transcoded into d (returned; the bytes written in *out): it stops before
// the first 16-unit step that holds a surrogate (UCS-2) and where fewer units than a step are left; 0 where the CPU
// or the chosen tier has no wide path. d has room for 3 (UCS-2) or 2 (UCS-1) bytes a unit plus kTranscodeSlack.
size_t transcode_wide_ucs2(const uint16_t* s, size_t i, size_t n, uint8_t* d, size_t* out);
size_t transcode_wide_ucs1(const uint8_t* s, size_t i, size_t n, uint8_t* d, size_t* out);

// The transcoder's tier: "vbmi2" or "scalar". set: "scalar", or "auto" (the best this CPU has); anything else
// throws std::invalid_argument.
const char* transcode_tier();
void transcode_set_tier(const std::string& tier);

}  // namespace bpe
