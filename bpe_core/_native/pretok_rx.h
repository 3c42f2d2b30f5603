// A compiled matcher for the subset of regex that pre-tokenizers use (bpe_core/pretokenize/compiler.py compiles a
// pattern list into a program): alternations, sequences, character classes given as code-point ranges (each class
// derived by the `regex` module itself, over every code point), greedy and possessive quantifiers {m,n}, optional
// groups, one-character lookaheads, `$`; a list of patterns splits each piece left by the previous one.
//
// A registered program is a Pretok kind >= kRxBase, so every path that takes a Pretok (the encoder, the counter, the
// Python split) runs it through pretok_split / pretok_split_some without knowing it is not a hand-written preset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pretok.h"

namespace bpe {

constexpr int kRxBase = 64;

// Register a program; returns its kind (kRxBase + index). `program` and `classes` are the flat encodings that
// pretok_compiler.py documents; throws std::invalid_argument when malformed. Programs live for the process.
Pretok rx_register(const std::vector<int64_t>& program, const std::vector<std::vector<uint32_t>>& classes);
inline bool rx_is(Pretok kind) { return static_cast<int>(kind) >= kRxBase; }
// "rx:<index>" <-> kind; kNone when not a registered program's name.
Pretok rx_from_name(std::string_view name);
std::string rx_name(Pretok kind);

void rx_split(Pretok kind, const uint8_t* text, size_t n, std::vector<size_t>& ends);
size_t rx_split_some(Pretok kind, const uint8_t* text, size_t n, size_t* pos, size_t* ends, size_t max);

}  // namespace bpe
