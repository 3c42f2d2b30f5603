#include "superword.h"

#include <algorithm>
#include <functional>

namespace bpe {

namespace {

constexpr uint64_t kNoMerge = ~uint64_t(0);

uint64_t value_of(const SuperwordTables& t, uint32_t a, uint32_t b) {
    const uint64_t* v = t.merges.find(uint64_t(a) << 32 | b);
    return v ? *v : kNoMerge;
}

// Short runs (most are 2-6 tokens): a scan for the smallest value, then erase. Quadratic, so only up to kScanLimit.
size_t merge_scan(uint32_t* run, size_t len, const SuperwordTables& t, std::vector<uint64_t>& vals) {
    vals.resize(len);
    for (size_t i = 0; i + 1 < len; ++i) vals[i] = value_of(t, run[i], run[i + 1]);
    while (len >= 2) {
        size_t at = 0;
        for (size_t i = 1; i + 1 < len; ++i)
            if (vals[i] < vals[at]) at = i;
        if (vals[at] == kNoMerge) break;
        run[at] = static_cast<uint32_t>(vals[at] & 0xFFFFFFFFu);
        std::copy(run + at + 2, run + len, run + at + 1);
        std::copy(vals.begin() + at + 2, vals.begin() + len, vals.begin() + at + 1);
        --len;
        if (at > 0) vals[at - 1] = value_of(t, run[at - 1], run[at]);
        if (at + 1 < len) vals[at] = value_of(t, run[at], run[at + 1]);
    }
    return len;
}

// Long runs: a heap of (value, position) over a linked list, O(n log n) (a 1 MB run of words cannot stall).
size_t merge_heap(uint32_t* run, size_t len, const SuperwordTables& t, SuperwordScratch& s) {
    constexpr uint32_t kEnd = ~uint32_t(0);
    s.next.resize(len);
    s.prev.resize(len);
    s.heap.clear();
    for (size_t i = 0; i < len; ++i) {
        s.next[i] = i + 1 < len ? static_cast<uint32_t>(i + 1) : kEnd;
        s.prev[i] = i > 0 ? static_cast<uint32_t>(i - 1) : kEnd;
    }
    auto greater = std::greater<std::pair<uint64_t, uint32_t>>();
    auto push = [&](uint32_t i) {
        if (i == kEnd || s.next[i] == kEnd) return;
        const uint64_t v = value_of(t, run[i], run[s.next[i]]);
        if (v == kNoMerge) return;
        s.heap.emplace_back(v, i);
        std::push_heap(s.heap.begin(), s.heap.end(), greater);
    };
    for (size_t i = 0; i + 1 < len; ++i) push(static_cast<uint32_t>(i));
    std::vector<uint8_t> dead(len, 0);
    while (!s.heap.empty()) {
        std::pop_heap(s.heap.begin(), s.heap.end(), greater);
        const auto [v, i] = s.heap.back();
        s.heap.pop_back();
        if (dead[i] || s.next[i] == kEnd || value_of(t, run[i], run[s.next[i]]) != v) continue;  // stale
        const uint32_t j = s.next[i];
        run[i] = static_cast<uint32_t>(v & 0xFFFFFFFFu);
        dead[j] = 1;
        s.next[i] = s.next[j];
        if (s.next[j] != kEnd) s.prev[s.next[j]] = i;
        push(s.prev[i]);
        push(i);
    }
    size_t out = 0;
    for (uint32_t i = 0; i != kEnd; i = s.next[i]) run[out++] = run[i];
    return out;
}

}  // namespace

size_t merge_run(uint32_t* run, size_t len, const SuperwordTables& t, SuperwordScratch& s) {
    constexpr size_t kScanLimit = 32;
    if (len <= kScanLimit) return merge_scan(run, len, t, s.values);
    return merge_heap(run, len, t, s);
}

}  // namespace bpe
