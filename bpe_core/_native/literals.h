// Added tokens found in text by the core (issue 31 item 3): a set of literal strings (GGUF user-defined tokens,
// Hugging Face added tokens without flags, mpt's runs of spaces), found leftmost-longest in one pass, as
// bpe_core/model/added_tokens.py's TokenMatcher finds them (its regex alternation, longest first). The text between
// two of them is an ordinary text of its own (the pre-tokenizer sees its end as the end of a text).
//
// One pass: where the tokens begin with at most four distinct byte pairs (and one-byte tokens), 16 positions at a
// time are compared with those pairs (mpt's 178 tokens begin "  " or "[P": single spaces are no candidates); else,
// with two to six distinct first bytes, with those bytes (deepseek's "[PAD..]" and 13 Latin-1 letters: "[", 0xC2,
// 0xC3); else the positions whose byte starts some token are found with memchr when one byte starts them all, or a
// 256-entry table. At a candidate the first two bytes are looked up in a 65,536-bit set of the tokens' first two
// bytes, and only then the tokens are walked as a trie from there, byte by byte, to the longest that ends there (a
// hash lookup per distinct length, longest first, cost mpt ~50 instructions per byte: its space runs have dozens).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <map>
#include <utility>
#include <vector>

namespace bpe {

class Literals {
  public:
    // (token bytes, id); empty tokens are left out; of two equal tokens the first is kept.
    explicit Literals(const std::vector<std::pair<std::string, uint32_t>>& tokens) {
        pairs_.assign(65536 / 64, 0);
        std::fill(std::begin(run_of_), std::end(run_of_), int16_t(-1));
        // The trie, built with maps, then laid out breadth first: each node's edges sorted by byte, side by side.
        std::vector<std::map<uint8_t, uint32_t>> kids(1);
        std::vector<uint32_t> ids(1, kNone);
        for (const auto& [bytes, id] : tokens) {
            if (bytes.empty()) continue;
            uint32_t node = 0;
            for (const char ch : bytes) {
                const uint8_t b = static_cast<uint8_t>(ch);
                auto it = kids[node].find(b);
                if (it == kids[node].end()) {
                    it = kids[node].emplace(b, static_cast<uint32_t>(kids.size())).first;
                    kids.emplace_back();
                    ids.push_back(kNone);
                }
                node = it->second;
            }
            if (ids[node] != kNone) continue;  // of two equal tokens the first is kept
            ids[node] = id;
            ++count_;
            const uint8_t a = static_cast<uint8_t>(bytes[0]);
            starts_[a] = true;
            if (bytes.size() == 1) {
                if (std::find(singles_.begin(), singles_.end(), a) == singles_.end()) singles_.push_back(a);
                continue;
            }
            const unsigned pair = unsigned(a) << 8 | static_cast<uint8_t>(bytes[1]);
            pairs_[pair >> 6] |= uint64_t(1) << (pair & 63);
            const std::pair<uint8_t, uint8_t> p{a, static_cast<uint8_t>(bytes[1])};
            if (std::find(pair_list_.begin(), pair_list_.end(), p) == pair_list_.end()) pair_list_.push_back(p);
        }
        std::vector<uint32_t> order{0}, index(kids.size(), 0);  // breadth-first order, old node -> new
        for (size_t q = 0; q < order.size(); ++q)
            for (const auto& [b, child] : kids[order[q]]) {
                index[child] = static_cast<uint32_t>(order.size());
                order.push_back(child);
            }
        nodes_.resize(order.size());
        for (size_t q = 0; q < order.size(); ++q) {
            Node& node = nodes_[q];
            node.id = ids[order[q]];
            node.first = static_cast<uint32_t>(edge_bytes_.size());
            node.count = static_cast<uint32_t>(kids[order[q]].size());
            for (const auto& [b, child] : kids[order[q]]) {
                edge_bytes_.push_back(b);
                edge_child_.push_back(index[child]);
            }
        }
        vector_scan_ = pair_list_.size() + singles_.size() <= kVectorKeys;
        int distinct = 0;
        for (int b = 0; b < 256; ++b)
            if (starts_[b]) distinct++, only_ = b, first_list_.push_back(static_cast<uint8_t>(b));
        if (distinct != 1) only_ = -1;
        // Runs of one byte (mpt's 2-24 spaces): the trie's path c, cc, ccc, ... as a table, with the longest token
        // on it up to each depth, so that a run is measured, not walked node by node (14 instructions a byte).
        for (int c = 0; c < 256; ++c) {
            uint32_t node = child(nodes_[0], uint8_t(c));
            if (!node || !child(nodes_[node], uint8_t(c))) continue;
            Run run;
            run.node.push_back(0);
            run.best_len.push_back(0);
            run.best_id.push_back(kNone);
            for (uint32_t depth = 1; node; node = child(nodes_[node], uint8_t(c)), ++depth) {
                const bool ends = nodes_[node].id != kNone;
                run.node.push_back(node);
                run.best_len.push_back(ends ? depth : run.best_len.back());
                run.best_id.push_back(ends ? nodes_[node].id : run.best_id.back());
            }
            run_of_[c] = static_cast<int16_t>(runs_.size());
            runs_.push_back(std::move(run));
        }
#if defined(__SSE2__)
        // The scans' keys, broadcast once: the pairs' bytes (then the one-byte tokens), or the first bytes.
        if (vector_scan_) {
            for (const auto& [x, y] : pair_list_) {
                first_v_[n_keys_] = _mm_set1_epi8(char(x));
                second_v_[n_keys_++] = _mm_set1_epi8(char(y));
            }
            n_pairs_ = n_keys_;
            for (uint8_t x : singles_) first_v_[n_keys_++] = _mm_set1_epi8(char(x));
        } else if (only_ < 0 && first_list_.size() <= kVectorFirsts) {
            for (uint8_t x : first_list_) first_v_[n_keys_++] = _mm_set1_epi8(char(x));
        }
#endif
    }

    bool empty() const { return count_ == 0; }

    // The first token in s[pos, n), leftmost and then longest: true with its span [*a, *b) and its id.
    bool next(const uint8_t* s, size_t n, size_t pos, size_t* a, size_t* b, uint32_t* id) const {
        size_t i = pos;
#if defined(__SSE2__)
        if (vector_scan_) {
            for (; i + 17 <= n; i += 16) {
                const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
                const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 1));
                __m128i hit = _mm_setzero_si128();
                for (size_t q = 0; q < n_pairs_; ++q)
                    hit = _mm_or_si128(
                        hit, _mm_and_si128(_mm_cmpeq_epi8(v, first_v_[q]), _mm_cmpeq_epi8(v1, second_v_[q])));
                for (size_t q = n_pairs_; q < n_keys_; ++q) hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, first_v_[q]));
                for (unsigned m = unsigned(_mm_movemask_epi8(hit)); m; m &= m - 1) {
                    const size_t j = i + unsigned(__builtin_ctz(m));
                    if (size_t len = match_at(s, n, j, id)) {
                        *a = j;
                        *b = j + len;
                        return true;
                    }
                }
            }
        }
        if (!vector_scan_ && n_keys_) {  // a few first bytes: 16 positions a compare each
            for (; i + 16 <= n; i += 16) {
                const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
                __m128i hit = _mm_setzero_si128();
                for (size_t q = 0; q < n_keys_; ++q) hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, first_v_[q]));
                for (unsigned m = unsigned(_mm_movemask_epi8(hit)); m; m &= m - 1) {
                    const size_t j = i + unsigned(__builtin_ctz(m));
                    if (size_t len = match_at(s, n, j, id)) {
                        *a = j;
                        *b = j + len;
                        return true;
                    }
                }
            }
        }
#endif
        while (i < n) {
            if (only_ >= 0) {
                const void* hit = std::memchr(s + i, only_, n - i);
                if (!hit) return false;
                i = static_cast<size_t>(static_cast<const uint8_t*>(hit) - s);
            } else {
                while (i < n && !starts_[s[i]]) ++i;
                if (i >= n) return false;
            }
            if (size_t len = match_at(s, n, i, id)) {
                *a = i;
                *b = i + len;
                return true;
            }
            ++i;
        }
        return false;
    }

  private:
    static constexpr uint32_t kNone = ~uint32_t(0);
    struct Node {
        uint32_t first = 0, count = 0;  // edges [first, first + count) of edge_bytes_ / edge_child_, by byte
        uint32_t id = kNone;            // the token that ends here
    };

    // The child of `node` by byte b, or 0 (the root is nobody's child).
    uint32_t child(const Node& node, uint8_t b) const {
        const uint8_t* bytes = edge_bytes_.data() + node.first;
        if (node.count <= 8) {
            for (uint32_t e = 0; e < node.count; ++e)
                if (bytes[e] == b) return edge_child_[node.first + e];
            return 0;
        }
        const uint8_t* hit = std::lower_bound(bytes, bytes + node.count, b);
        return hit != bytes + node.count && *hit == b ? edge_child_[node.first + uint32_t(hit - bytes)] : 0;
    }

    // The length of the longest token at s[i] (s[i] starts one), or 0.
    size_t match_at(const uint8_t* s, size_t n, size_t i, uint32_t* id) const {
        const bool pair = i + 1 < n && ((pairs_[(unsigned(s[i]) << 8 | s[i + 1]) >> 6] >> (s[i + 1] & 63)) & 1);
        size_t best = 0;
        uint32_t node = 0;
        size_t from = i;
        if (const int r = run_of_[s[i]]; r >= 0 && pair && s[i + 1] == s[i]) {  // a run: measured, then walked on
            const Run& run = runs_[size_t(r)];
            const size_t deepest = run.node.size() - 1;
            size_t len = 2;
#if defined(__SSE2__)
            const __m128i c = _mm_set1_epi8(char(s[i]));
            while (len < deepest && i + len + 16 <= n) {
                const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + len));
                const unsigned same = unsigned(__builtin_ctz(~unsigned(_mm_movemask_epi8(_mm_cmpeq_epi8(v, c)))));
                len += same;  // (ctz of bit 16 and up: 16 when all 16 bytes are c)
                if (same < 16) break;
            }
#endif
            while (len < deepest && i + len < n && s[i + len] == s[i]) ++len;
            len = std::min(len, deepest);
            if (run.best_len[len]) best = run.best_len[len], *id = run.best_id[len];
            node = run.node[len];
            from = i + len;
        }
        for (size_t j = from; j < n; ++j) {
            node = child(nodes_[node], s[j]);
            if (!node) break;
            if (nodes_[node].id != kNone) best = j + 1 - i, *id = nodes_[node].id;
            if (!pair) break;  // no longer token begins with these two bytes
        }
        return best;
    }

    std::vector<Node> nodes_;  // the trie of the tokens, breadth first (node 0 the root)
    std::vector<uint8_t> edge_bytes_;
    std::vector<uint32_t> edge_child_;
    size_t count_ = 0;
    std::vector<uint64_t> pairs_;
    static constexpr size_t kVectorKeys = 4;
    std::vector<std::pair<uint8_t, uint8_t>> pair_list_;  // the distinct first two bytes of the longer tokens
    std::vector<uint8_t> singles_;                        // the one-byte tokens
    static constexpr size_t kVectorFirsts = 6;
    std::vector<uint8_t> first_list_;  // the distinct first bytes
#if defined(__SSE2__)
    __m128i first_v_[kVectorFirsts > kVectorKeys ? kVectorFirsts : kVectorKeys];
    __m128i second_v_[kVectorKeys];
#endif
    size_t n_pairs_ = 0, n_keys_ = 0;
    bool vector_scan_ = false;
    bool starts_[256] = {};
    int only_ = -1;
    struct Run {  // by depth d (0: the root): the trie's node for c repeated d times, the longest token up to it
        std::vector<uint32_t> node, best_len, best_id;
    };
    std::vector<Run> runs_;
    int16_t run_of_[256];  // the byte's Run in runs_, or -1
};

}  // namespace bpe
