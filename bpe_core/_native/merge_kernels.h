// The merge kernels of both levels of BPE: an encoder's piece of byte tokens and a superword run of word tokens.
// At each step the adjacent pair with the smallest value merges, the leftmost on ties; a pair's value is
// rank << 32 | result id, kNoMerge where it does not merge. The kernels are templates over that lookup
// (value(left, right)), so the encoder's pair table and a superword level's supermerges are each inlined into one
// copy of the same loop. bpe_core/model/merges.py (merge_ids) is the reference of both.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "encoder.h"  // MergeStats, kPollPops and the stop check of long loops
#include "tables.h"   // kNoMerge, kIdMask

namespace bpe {

// Short pieces: leftmost smallest value, merged until none merges, in place: ids[0, n) with values[i] the value of
// ids[i], ids[i + 1] (n - 1 of them, filled by the caller, n >= 2). Returns the new length. GCC turns the shifting
// loops back into memmove calls unless told not to (-ftree-loop-distribute-patterns): 11 library calls per new piece
// of 20 MB.
template <class Value>
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
size_t merge_scan(uint32_t* ids, uint64_t* values, size_t n, const Value& value) {
    size_t m = n - 1;  // number of pairs
    while (m > 0) {
        size_t best_i = 0;
        uint64_t best = values[0];
        for (size_t i = 1; i < m; ++i) {
            if (values[i] < best) {
                best = values[i];
                best_i = i;
            }
        }
        if (best == kNoMerge) break;
        size_t i = best_i;
        ids[i] = static_cast<uint32_t>(best & kIdMask);
        // Shifted in place by a loop: a few elements, where memmove was a library call each (two per merge).
        for (size_t k = i + 1; k < m; ++k) {
            ids[k] = ids[k + 1];
            values[k - 1] = values[k];
        }
        --m;
        if (i > 0) values[i - 1] = value(ids[i - 1], ids[i]);
        if (i < m) values[i] = value(ids[i], ids[i + 1]);
    }
    return m + 1;
}

// Long pieces: a heap of (value, position) with lazy invalidation over a doubly linked list, O(n log n) (a 1 MiB
// piece without spaces, or a 1 MB run of words, cannot stall). Appends the merged ids of src[0, n) to out; stats,
// when given, receives the heap's pushes and pops. Polls the thread's stop check every kPollPops pops (a partial
// result then: the caller checks stopped()).
template <class Value>
void merge_heap(const uint32_t* src, size_t n, const Value& value, std::vector<uint32_t>& out, MergeStats* stats) {
    struct Entry {
        uint64_t value;
        uint64_t pos;
        uint64_t key;
        bool operator>(const Entry& o) const { return value != o.value ? value > o.value : pos > o.pos; }
    };
    constexpr int64_t kGone = -1;
    std::vector<int64_t> toks(src, src + n);
    std::vector<uint32_t> nxt(n), prv(n);
    for (size_t i = 0; i < n; ++i) {
        nxt[i] = static_cast<uint32_t>(i + 1);
        prv[i] = static_cast<uint32_t>(i - 1);  // wraps for i == 0: "none"
    }
    constexpr uint32_t kNone = ~uint32_t(0);
    std::vector<Entry> heap;
    heap.reserve(n);
    for (size_t i = 0; i + 1 < n; ++i) {
        uint64_t key = uint64_t(toks[i]) << 32 | uint64_t(toks[i + 1]);
        uint64_t v = value(static_cast<uint32_t>(toks[i]), static_cast<uint32_t>(toks[i + 1]));
        if (v != kNoMerge) heap.push_back(Entry{v, i, key});
    }
    auto greater = std::greater<Entry>();
    std::make_heap(heap.begin(), heap.end(), greater);
    uint64_t pushes = heap.size(), pops = 0;
    auto push = [&](uint64_t v, size_t pos, uint64_t key) {
        heap.push_back(Entry{v, pos, key});
        std::push_heap(heap.begin(), heap.end(), greater);
        ++pushes;
    };
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), greater);
        Entry e = heap.back();
        heap.pop_back();
        if (++pops % kPollPops == 0 && stop_requested()) break;  // partial: the caller checks stopped()
        size_t i = e.pos;
        size_t j = nxt[i];
        if (toks[i] == kGone || j >= n || (uint64_t(toks[i]) << 32 | uint64_t(toks[j])) != e.key) continue;
        toks[i] = static_cast<int64_t>(e.value & kIdMask);
        toks[j] = kGone;
        size_t k = nxt[j];
        nxt[i] = static_cast<uint32_t>(k);
        if (k < n) prv[k] = static_cast<uint32_t>(i);
        uint32_t p = prv[i];
        if (p != kNone) {
            uint32_t l = static_cast<uint32_t>(toks[p]), r = static_cast<uint32_t>(toks[i]);
            uint64_t v = value(l, r);
            if (v != kNoMerge) push(v, p, uint64_t(l) << 32 | r);
        }
        if (k < n) {
            uint32_t l = static_cast<uint32_t>(toks[i]), r = static_cast<uint32_t>(toks[k]);
            uint64_t v = value(l, r);
            if (v != kNoMerge) push(v, i, uint64_t(l) << 32 | r);
        }
    }
    if (stats) {
        stats->pushes = pushes;
        stats->pops = pops;
    }
    for (size_t i = 0; i < n; ++i)
        if (toks[i] != kGone) out.push_back(static_cast<uint32_t>(toks[i]));
}

}  // namespace bpe
