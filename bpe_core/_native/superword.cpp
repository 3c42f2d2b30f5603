// The supermerges of a run: the second level of BPE, on the one pair of merge kernels (merge_kernels.h).
#include "superword.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <unordered_map>

#include "merge_kernels.h"

namespace bpe {

namespace {

// Past these, the boundaries a supermerge can cross are not listed (every boundary is tried): the word tokens a
// token can end or start with, and the crossable pairs.
constexpr size_t kMaxEdgeSet = 4096;
constexpr size_t kMaxCrossable = size_t(1) << 20;

using EdgeSets = std::unordered_map<uint32_t, std::vector<uint32_t>>;

// The word tokens (ids below `words`) that token `id` can start or end with: its set, or itself where no merge
// makes it.
std::vector<uint32_t> edge_of(const EdgeSets& edges, uint32_t id, size_t words) {
    auto it = edges.find(id);
    if (it != edges.end()) return it->second;
    return id < words ? std::vector<uint32_t>{id} : std::vector<uint32_t>{};
}

// The word tokens each token can end with (part: the merges' right parts) or start with (their left parts), for
// every id some merge makes, to the fixpoint: a merge may make a token that exists already (a word token, or one
// an earlier merge makes too), and an earlier merge may use a token a later one makes. false: a set outgrew
// kMaxEdgeSet.
bool edge_sets(const std::vector<uint32_t>& part, const std::vector<uint32_t>& result, size_t words, EdgeSets& edges) {
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < part.size(); ++r) {
            const std::vector<uint32_t> add = edge_of(edges, part[r], words);
            std::vector<uint32_t>& into = edges.try_emplace(result[r], edge_of(edges, result[r], words)).first->second;
            std::vector<uint32_t> merged;
            std::set_union(into.begin(), into.end(), add.begin(), add.end(), std::back_inserter(merged));
            if (merged.size() != into.size()) {
                if (merged.size() > kMaxEdgeSet) return false;
                into.swap(merged);
                changed = true;
            }
        }
    }
    return true;
}

// The boundaries between word tokens that a supermerge (L, R) can join: (x, y) for every word token x that L can
// end with and y that R can start with. false: more than kMaxCrossable.
bool list_crossable(const std::vector<uint32_t>& left, const std::vector<uint32_t>& right,
                    const std::vector<uint32_t>& result, SuperwordTables& t) {
    const size_t words = t.flags.size();
    EdgeSets lasts, firsts;
    if (!edge_sets(right, result, words, lasts) || !edge_sets(left, result, words, firsts)) return false;
    size_t pairs = 0;
    for (size_t r = 0; r < left.size(); ++r) {
        const std::vector<uint32_t> xs = edge_of(lasts, left[r], words), ys = edge_of(firsts, right[r], words);
        pairs += xs.size() * ys.size();
        if (pairs > kMaxCrossable) return false;
        for (uint32_t x : xs) {
            t.flags[x] |= SuperwordTables::kEndsLeft;
            for (uint32_t y : ys) {
                t.flags[y] |= SuperwordTables::kStartsRight;
                const uint32_t b = SuperwordTables::cross_bit(x, y);
                t.cross_bits[b >> 6] |= uint64_t(1) << (b & 63);
            }
        }
    }
    return true;
}

// ids[from, end) moved down to ids[to, ...) (to <= from), by a loop: a few ids, where memmove is a library call.
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
__attribute__((always_inline)) inline void move_down(uint32_t* ids, size_t to, size_t from, size_t end) {
    if (to == from) return;
    for (size_t k = from; k < end; ++k) ids[to++] = ids[k];
}

// One sub-run's supermerges, in place (the merge kernels over the supermerges' lookup): its new length.
size_t merge_sub(uint32_t* run, size_t len, const SuperwordTables& t) {
    auto value = [&t](uint32_t a, uint32_t b) {
        const uint64_t* v = t.merges.find(uint64_t(a) << 32 | b);
        return v ? *v : kNoMerge;
    };
    if (len == 2) {
        const uint64_t v = value(run[0], run[1]);
        if (v == kNoMerge) return 2;
        run[0] = static_cast<uint32_t>(v & kIdMask);
        return 1;
    }
    if (len <= kScanLimit) {
        uint64_t values[kScanLimit];
        for (size_t i = 0; i + 1 < len; ++i) values[i] = value(run[i], run[i + 1]);
        return merge_scan(run, values, len, value);
    }
    std::vector<uint32_t> merged;  // (a sub-run of more than kScanLimit tokens: rare)
    merge_heap(run, len, value, merged, nullptr);
    std::copy(merged.begin(), merged.end(), run);
    return merged.size();
}

}  // namespace

std::shared_ptr<SuperwordTables> make_superword_tables(std::vector<uint32_t> token_len, std::string_view eligible,
                                                       std::string_view letter, bool run_needs_letter,
                                                       const std::vector<uint32_t>& left,
                                                       const std::vector<uint32_t>& right,
                                                       const std::vector<uint32_t>& result) {
    if (eligible.size() != token_len.size() || letter.size() != token_len.size())
        throw std::invalid_argument("eligible and letter need one flag per id");
    if (left.size() != right.size() || left.size() != result.size())
        throw std::invalid_argument("left, right and result must be equally long");
    auto t = std::make_shared<SuperwordTables>();
    t->token_len = std::move(token_len);
    t->flags.assign(t->token_len.size(), 0);
    for (size_t i = 0; i < t->flags.size(); ++i)
        t->flags[i] = uint8_t((eligible[i] ? SuperwordTables::kEligible : 0) | (letter[i] ? SuperwordTables::kLetter : 0));
    t->run_needs_letter = run_needs_letter;
    for (size_t r = 0; r < left.size(); ++r) {
        const uint64_t key = uint64_t(left[r]) << 32 | right[r];
        if (!t->merges.find(key)) t->merges[key] = uint64_t(r) << 32 | result[r];
    }
    if (!list_crossable(left, right, result, *t)) {
        for (uint8_t& f : t->flags) f |= SuperwordTables::kEndsLeft | SuperwordTables::kStartsRight;
        std::fill(t->cross_bits.begin(), t->cross_bits.end(), ~uint64_t(0));
    }
    return t;
}

size_t merge_run(uint32_t* run, size_t len, const SuperwordTables& t) {
    size_t out = 0;
    for (size_t i = 0; i < len;) {
        size_t j = i + 1;
        while (j < len && t.may_cross(run[j - 1], t.flags[run[j - 1]], run[j], t.flags[run[j]])) ++j;
        if (j - i == 1) {
            run[out++] = run[i];
        } else {
            move_down(run, out, i, j);
            out += merge_sub(run + out, j - i, t);
        }
        i = j;
    }
    return out;
}

size_t merge_run_bits(uint32_t* run, size_t len, uint64_t cross, const SuperwordTables& t) {
    size_t out = 0, i = 0;
    while (cross) {
        const size_t first = size_t(__builtin_ctzll(cross)) - 1;    // a sub-run from token `first`
        const size_t end = first + 1 + size_t(__builtin_ctzll(~(cross >> (first + 1))));  // to `end`
        move_down(run, out, i, end);  // the tokens alone before it, and it
        out += first - i;
        out += merge_sub(run + out, end - first, t);
        i = end;
        cross = end >= 64 ? 0 : cross & (~uint64_t(0) << end);
    }
    move_down(run, out, i, len);
    return out + (len - i);
}

uint32_t* RunTracker::close_run(uint32_t* start, size_t len, uint64_t cross, bool letter, uint32_t* from,
                                uint32_t* to) const {
    if (!cross || (t_.run_needs_letter && !letter)) return to;  // (a run of one token has no boundary)
    const size_t kept = cross & 1 ? merge_run(start, len, t_) : merge_run_bits(start, len, cross, t_);
    if (kept == len) return to;
    move_down(start, kept, len, len + size_t(to - from));  // the closing piece's ids, after the run's
    return to - (len - kept);
}

}  // namespace bpe
