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
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "pretok.h"

namespace bpe {

constexpr int kRxBase = 64;

// The matcher's work on one text is bounded: a backtracking pattern read from a tokenizer file (`a+a+a+a+a+b`, or
// `\p{L}+\p{L}+\p{N}`: adjacent unbounded runs whose classes overlap) would otherwise take hours on a line of a's.
// A step is one item tried or one character taken by a run; past kRxStepsBase + kRxStepsPerByte * n steps on a text
// of n bytes the split throws RxBudgetExceeded, which the bindings turn into PreTokenizeTimeout (the error of the
// `regex` path's time limit, so callers treat both alike: the encoding pipeline makes the document a dead letter).
// Measured on 300 documents of each shared corpus, the 10 llama.cpp regex lists on this matcher take 3.1 steps per
// byte on average and 8.2 at most (tests/native/test_native_pretok_budget.py keeps a margin of 8x under the budget);
// `a+a+a+a+a+b` on 800 a's, ~10^12 attempts, stops after ~2 M steps (milliseconds; `regex` runs over its 10 s).
constexpr uint64_t kRxStepsBase = uint64_t(1) << 20;
constexpr uint64_t kRxStepsPerByte = 1024;

struct RxBudgetExceeded : std::runtime_error {
    RxBudgetExceeded(const std::string& what, size_t at_byte) : std::runtime_error(what), at(at_byte) {}
    size_t at;  // the offset of the piece being matched when the budget ran out
};

// Register a program; returns its kind (kRxBase + index). `program` and `classes` are the flat encodings that
// pretok_compiler.py documents; throws std::invalid_argument when malformed. `label` (the patterns) names the program
// in RxBudgetExceeded's message. Programs live for the process.
Pretok rx_register(const std::vector<int64_t>& program, const std::vector<std::vector<uint32_t>>& classes,
                   const std::string& label = "");
// How many steps the last split on this thread took (for tests).
uint64_t rx_last_steps();
// The instruction tier of the cascades' window ("vbmi" or "sse2"), and forcing one ("sse2", or "auto": the best this
// CPU has) for tests; the pieces are the same in every tier.
const char* rx_tier();
void rx_set_tier(const std::string& tier);
inline bool rx_is(Pretok kind) { return static_cast<int>(kind) >= kRxBase; }
// "rx:<index>" <-> kind; kNone when not a registered program's name.
Pretok rx_from_name(std::string_view name);
std::string rx_name(Pretok kind);

void rx_split(Pretok kind, const uint8_t* text, size_t n, std::vector<size_t>& ends);
size_t rx_split_some(Pretok kind, const uint8_t* text, size_t n, size_t* pos, size_t* ends, size_t max);

}  // namespace bpe
