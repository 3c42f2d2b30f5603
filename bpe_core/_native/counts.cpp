#include "counts.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <queue>
#include <stdexcept>
#include <string>

namespace bpe {

namespace {
std::array<uint32_t, 256> make_crc_table() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
    }
    return t;
}
const std::array<uint32_t, 256> kCrcTable = make_crc_table();
// The first 8 bytes as a big-endian integer (zero padded): comparing it orders most chunks without a memcmp
// (sorting a batch's 100k chunks and merging 16 tables: see the commit message for the figures).
inline uint64_t prefix_of(const uint8_t* p, size_t n) {
    uint8_t b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(b, p, n < 8 ? n : 8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | b[i];
    return v;
}
}  // namespace

uint32_t crc32_of(const uint8_t* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) c = kCrcTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

void CountsColumns::push(const uint8_t* p, size_t n, int64_t c) {
    if (data.size() + n > 0x7FFFFFFFull)
        throw std::length_error("a counts table holds more than 2 GiB of chunk bytes: use more count shards");
    data.insert(data.end(), p, p + n);
    offsets.push_back(static_cast<int32_t>(data.size()));
    counts.push_back(c);
}

std::vector<CountsColumns> sorted_shards(const CountMap& map, uint32_t num_shards, int64_t weight,
                                         unsigned __int128* occurrences) {
    struct Row {
        uint64_t prefix;
        const uint8_t* p;
        uint32_t len;
        uint32_t shard;
        int64_t count;
    };
    std::vector<Row> rows;
    rows.reserve(map.size());
    unsigned __int128 total = 0;
    map.for_each([&](const uint8_t* p, size_t n, uint64_t c) {
        int64_t weighted;
        if (c > uint64_t(INT64_MAX) || __builtin_mul_overflow(static_cast<int64_t>(c), weight, &weighted))
            throw std::overflow_error("a chunk count times its source weight exceeds int64: lower the weights");
        if (n > 0xFFFFFFFFull) throw std::length_error("a chunk longer than 4 GiB");
        total += static_cast<uint64_t>(weighted);
        const uint32_t shard = num_shards > 1 ? crc32_of(p, n) % num_shards : 0;
        rows.push_back(Row{prefix_of(p, n), p, static_cast<uint32_t>(n), shard, weighted});
    });
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
        if (a.shard != b.shard) return a.shard < b.shard;
        if (a.prefix != b.prefix) return a.prefix < b.prefix;
        return compare_bytes(a.p, a.len, b.p, b.len) < 0;
    });
    std::vector<CountsColumns> out(num_shards);
    for (const Row& r : rows) out[r.shard].push(r.p, r.len, r.count);
    *occurrences = total;
    return out;
}

CountsColumns merge_sorted(const std::vector<CountsView>& parts) {
    CountsColumns out;
    size_t rows = 0, bytes = 0;
    for (const CountsView& v : parts) {
        rows += v.n;
        bytes += v.n ? static_cast<size_t>(v.offsets[v.n] - v.offsets[0]) : 0;
        for (size_t i = 1; i < v.n; ++i)
            if (compare_bytes(v.chunk(i - 1), v.len(i - 1), v.chunk(i), v.len(i)) >= 0)
                throw std::invalid_argument("merge_sorted_counts: an input is not sorted by chunk with distinct chunks (row " +
                                            std::to_string(i) + ")");
    }
    out.offsets.reserve(rows + 1);
    out.counts.reserve(rows);
    out.data.reserve(std::min<size_t>(bytes, 0x7FFFFFFF));
    // (prefix, part, row) cursors in a min-heap on the chunk bytes; ties by part index (the sum does not depend on it).
    struct Cursor {
        uint64_t prefix;
        size_t part;
        size_t row;
    };
    auto greater = [&](const Cursor& a, const Cursor& b) {
        if (a.prefix != b.prefix) return a.prefix > b.prefix;
        const CountsView &va = parts[a.part], &vb = parts[b.part];
        int c = compare_bytes(va.chunk(a.row), va.len(a.row), vb.chunk(b.row), vb.len(b.row));
        return c != 0 ? c > 0 : a.part > b.part;
    };
    auto cursor = [&](size_t k, size_t i) { return Cursor{prefix_of(parts[k].chunk(i), parts[k].len(i)), k, i}; };
    std::priority_queue<Cursor, std::vector<Cursor>, decltype(greater)> heap(greater);
    for (size_t k = 0; k < parts.size(); ++k)
        if (parts[k].n) heap.push(cursor(k, 0));
    while (!heap.empty()) {
        const Cursor top = heap.top();
        heap.pop();
        const size_t k = top.part, i = top.row;
        const CountsView& v = parts[k];
        const uint8_t* p = v.chunk(i);
        const size_t n = v.len(i);
        const size_t last = out.counts.size();
        const bool same = last > 0 && compare_bytes(out.data.data() + out.offsets[last - 1],
                                                    static_cast<size_t>(out.offsets[last] - out.offsets[last - 1]),
                                                    p, n) == 0;
        if (same) {
            if (__builtin_add_overflow(out.counts[last - 1], v.counts[i], &out.counts[last - 1]))
                throw std::overflow_error("a chunk count exceeds int64: lower the source weights");
        } else {
            out.push(p, n, v.counts[i]);
        }
        if (i + 1 < v.n) heap.push(cursor(k, i + 1));
    }
    return out;
}

}  // namespace bpe
