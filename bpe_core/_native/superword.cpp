// The supermerges of a run: the second level of BPE, on the one pair of merge kernels (merge_kernels.h).
#include "superword.h"

#include <algorithm>

#include "merge_kernels.h"

namespace bpe {

size_t merge_run(uint32_t* run, size_t len, const SuperwordTables& t, SuperwordScratch& s) {
    auto value = [&t](uint32_t a, uint32_t b) {
        const uint64_t* v = t.merges.find(uint64_t(a) << 32 | b);
        return v ? *v : kNoMerge;
    };
    if (len < 2) return len;
    if (len <= kScanLimit) {
        s.values.resize(len);
        for (size_t i = 0; i + 1 < len; ++i) s.values[i] = value(run[i], run[i + 1]);
        return merge_scan(run, s.values.data(), len, value);
    }
    s.merged.clear();
    merge_heap(run, len, value, s.merged, nullptr);
    std::copy(s.merged.begin(), s.merged.end(), run);
    return s.merged.size();
}

}  // namespace bpe
