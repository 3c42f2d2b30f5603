// The 64-byte block splitter (issue 21): the pieces of the five presets (r50k, cl100k, o200k,
// llama3, qwen2) found 64 bytes at a time by class masks and boundary algebra instead of one dispatch per piece. It
// gives exactly pretok_split_some's pieces (pretok.cpp stays the ground truth and the fallback: non-ASCII zones,
// block-edge cases and the last 64 bytes of a text go through it), proved piece for piece by
// tests/native/test_native_pretok_blocks.py.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pretok.h"

namespace bpe {

// Same contract as pretok_split_some: the next pieces of text[0:n] from *pos, at most `max` end offsets written to
// `ends`, *pos moved to the last; returns how many (0 only at the end of the text). It may return fewer than `max`
// before the end (it stops when fewer than 64 slots are left and it has written some).
size_t pretok_blocks_split_some(Pretok kind, const uint8_t* text, size_t n, size_t* pos, size_t* ends, size_t max);

// The same in a given tier: "auto" (the best this CPU has: pretok_blocks_tier), or "sse2" (for tests of that tier);
// with `covered`, adds to it the bytes whose pieces came from blocks (not from the scalar fallback), for tests.
size_t pretok_blocks_split_some_tier(Pretok kind, const uint8_t* text, size_t n, size_t* pos, size_t* ends, size_t max,
                                     const char* tier, size_t* covered);

// Whether `kind` has a block algebra here (else pretok_blocks_split_some is pretok_split_some).
bool pretok_blocks_covers(Pretok kind);

// The instruction tier the block classifier runs in on this CPU: "avx2" or "sse2" (chosen once).
const char* pretok_blocks_tier();

}  // namespace bpe
