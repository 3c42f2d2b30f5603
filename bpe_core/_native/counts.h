// Sorted chunk-count tables in Arrow's layout (chunk: binary with int32 offsets, count: int64): what the count
// stage emits per hash shard and what its CombineFn merges, so counts never become one Python object per chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tables.h"

namespace bpe {

// zlib.crc32 of the bytes (the count stage's shard hash: the same on every machine and Python version).
uint32_t crc32_of(const uint8_t* p, size_t n);

inline int compare_bytes(const uint8_t* a, size_t an, const uint8_t* b, size_t bn) {
    const size_t n = an < bn ? an : bn;
    const int c = n ? std::memcmp(a, b, n) : 0;  // unsigned bytes, as Python's bytes and Arrow's sort compare
    if (c != 0) return c;
    return an < bn ? -1 : (an > bn ? 1 : 0);
}

// An owned table; rows sorted by chunk bytes, each chunk once.
struct CountsColumns {
    std::vector<int32_t> offsets{0};
    std::vector<uint8_t> data;
    std::vector<int64_t> counts;
    void push(const uint8_t* p, size_t n, int64_t c);  // throws std::length_error past 2 GiB of chunk bytes
};

// A table the caller owns (Arrow buffers): chunk i is data[offsets[i] : offsets[i + 1]].
struct CountsView {
    const int32_t* offsets;
    const uint8_t* data;
    const int64_t* counts;
    size_t n;
    const uint8_t* chunk(size_t i) const { return data + offsets[i]; }
    size_t len(size_t i) const { return static_cast<size_t>(offsets[i + 1] - offsets[i]); }
};

// The map's chunks split by crc32 % num_shards, each part sorted by bytes, counts multiplied by weight (checked:
// std::overflow_error). *occurrences gets the sum of the weighted counts (128 bits: exact).
std::vector<CountsColumns> sorted_shards(const CountMap& map, uint32_t num_shards, int64_t weight,
                                         unsigned __int128* occurrences);

// The k-way merge of sorted tables, equal chunks summed (std::overflow_error past int64). Inputs must be sorted
// with distinct chunks (std::invalid_argument names the first that is not).
CountsColumns merge_sorted(const std::vector<CountsView>& parts);

}  // namespace bpe
