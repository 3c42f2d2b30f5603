// Superword (SuperBPE) encoding and run counting over the word model's output (bpe_core/superword/reference.py is the
// reference). The word model's ids of a document are aligned with the pre-tokenizer's pieces of its bytes: a token
// that starts at a piece's start and ends at that piece's end is the whole pre-token. Maximal runs of two or more such
// tokens that are eligible (the eligibility rules are bpe_core/superword/reference.py's) get the supermerges by rank, as BPE
// merges bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pretok.h"
#include "tables.h"

namespace bpe {

struct SuperwordTables {
    // Per word-model id: a whole pre-token of it may join a run; its bytes hold a letter; it is the last word token of
    // some supermerge's left part; the first word token of some supermerge's right part.
    static constexpr uint8_t kEligible = 1, kLetter = 2, kEndsLeft = 4, kStartsRight = 8;
    std::vector<uint32_t> token_len;  // bytes of each word-model id
    std::vector<uint8_t> flags;       // per id, as above
    bool run_needs_letter = false;    // rule "letter-run": a run counts only if one of its tokens holds a letter
    U64Map<uint64_t> merges{1 << 12};  // (left << 32 | right) -> rank << 32 | result id
    // The boundaries between two word tokens x | y that a supermerge can ever join: some supermerge (L, R) whose L
    // ends with the word token x and whose R starts with y (through every way each can be made: a merge may give
    // a token that exists already). No merge crosses any other boundary, so a run is merged as the independent
    // sub-runs between them (most are one or two tokens). Those pairs as a bit each in a table of 2^16 bits, hashed:
    // a pair that shares a bit with one of them is taken for crossable too, which only makes its sub-run longer
    // (the same ids). All bits set, and every id flagged, where the pairs are too many to list.
    static constexpr unsigned kCrossBits = 16;
    std::vector<uint64_t> cross_bits = std::vector<uint64_t>(size_t(1) << (kCrossBits - 6), 0);

    static uint32_t cross_bit(uint32_t x, uint32_t y) {
        return uint32_t(((uint64_t(x) << 32 | y) * 0x9E3779B97F4A7C15ull) >> (64 - kCrossBits));
    }
    bool eligible(uint32_t id) const { return id < flags.size() && (flags[id] & kEligible); }
    bool letter(uint32_t id) const { return flags[id] & kLetter; }
    // Whether a supermerge may join x | y (x, y word ids; the flags of each given).
    bool may_cross(uint32_t x, uint8_t fx, uint32_t y, uint8_t fy) const {
        if (!(fx & kEndsLeft) || !(fy & kStartsRight)) return false;
        const uint32_t b = cross_bit(x, y);
        return (cross_bits[b >> 6] >> (b & 63)) & 1;
    }
};

// The tables from the word model's token lengths, one eligible and one letter flag (0 or 1) per id, the rule, and
// the supermerges in rank order (left, right -> result; of two equal pairs the first ranks). Throws
// std::invalid_argument on columns of different lengths.
std::shared_ptr<SuperwordTables> make_superword_tables(std::vector<uint32_t> token_len, std::string_view eligible,
                                                       std::string_view letter, bool run_needs_letter,
                                                       const std::vector<uint32_t>& left,
                                                       const std::vector<uint32_t>& right,
                                                       const std::vector<uint32_t>& result);

// Scratch space of one thread.
struct SuperwordScratch {
    std::vector<size_t> ends;
};

// The runs of one document: calls on_run(first token index, number of tokens) for each maximal run of >= 2 whole,
// eligible tokens. Returns false where the ids do not tile the document's pieces (the caller takes the reference).
template <class F>
bool for_each_run(Pretok kind, const uint8_t* text, size_t n, const uint32_t* ids, size_t m, const SuperwordTables& t,
                  SuperwordScratch& s, F&& on_run) {
    s.ends.clear();
    pretok_split(kind, text, n, s.ends);
    size_t pos = 0, piece = 0, piece_start = 0, run_start = 0, run_len = 0;
    bool run_letter = false;
    auto emit = [&]() {
        if (run_len >= 2 && (run_letter || !t.run_needs_letter)) on_run(run_start, run_len);
    };
    for (size_t k = 0; k < m; ++k) {
        const uint32_t id = ids[k];
        if (id >= t.token_len.size() || piece >= s.ends.size()) return false;
        const size_t start = pos;
        pos += t.token_len[id];
        const size_t piece_end = s.ends[piece];
        if (pos > piece_end) return false;  // a token across pieces: not this pre-tokenizer's ids
        const bool whole = start == piece_start && pos == piece_end;
        if (pos == piece_end) {
            piece_start = piece_end;
            ++piece;
        }
        if (whole && t.eligible(id)) {
            if (run_len == 0) {
                run_start = k;
                run_letter = false;
            }
            ++run_len;
            run_letter = run_letter || t.letter(id);
            continue;
        }
        emit();
        run_len = 0;
    }
    if (pos != n) return false;
    emit();
    return true;
}

// The supermerges of one run, in place: the merge kernels of merge_kernels.h (the encoder's) over the supermerges'
// lookup, on each sub-run between boundaries no supermerge crosses (SuperwordTables::may_cross). Returns the new
// length.
size_t merge_run(uint32_t* run, size_t len, const SuperwordTables& t);
// The same where the crossable boundaries are known: bit k of `cross` set where tokens k - 1 and k may join (len <=
// 64).
size_t merge_run_bits(uint32_t* run, size_t len, uint64_t cross, const SuperwordTables& t);

// The superword level inside the encoder's own pass (issue 37 item 6): the encoder writes a piece's word ids, then
// hands them here. A piece that became one eligible token extends the open run; any other piece (or an added token,
// or the end of a text) closes it: its supermerges are applied in place and the piece's ids after it move down. No
// second split and no second buffer: a piece is one token exactly when its one token spans it, as for_each_run
// finds by aligning ids with the pieces of a second split.
class RunTracker {
  public:
    // The open run: a plain struct, which a loop copies into locals (state()) and back (save()), so that its fields
    // stay in registers across the pieces of a batch.
    struct State {
        uint32_t* start = nullptr;
        size_t len = 0;
        uint64_t cross = 0;  // bit k: the run's tokens k - 1 and k may join (SuperwordTables::may_cross)
        uint32_t last = 0;   // the run's last token and its flags
        uint8_t last_flags = 0;
        bool letter = false;
    };

    explicit RunTracker(const SuperwordTables& t) : t_(t), flags_(t.flags.data()), words_(t.flags.size()) {}

    // The ids of one piece were written at [from, to), right after the open run's: the end of the ids.
    __attribute__((always_inline)) uint32_t* piece(State& s, uint32_t* from, uint32_t* to) const {
        if (to == from + 1) {
            const uint32_t id = *from;
            if (id < words_) {
                const uint8_t f = flags_[id];
                if (f & SuperwordTables::kEligible) {
                    if (!s.len) {
                        s.start = from, s.letter = false;
                    } else if (t_.may_cross(s.last, s.last_flags, id, f)) {
                        s.cross |= s.len < 64 ? uint64_t(1) << s.len : 1;  // (bit 0: a run past 64 tokens)
                    }
                    ++s.len;
                    s.last = id, s.last_flags = f;
                    s.letter |= (f & SuperwordTables::kLetter) != 0;
                    return to;
                }
            }
        }
        return close(s, from, to);
    }
    // Closes the open run, whose ids end at `from` ([from, to): ids written after it): the end of the ids.
    __attribute__((always_inline)) uint32_t* close(State& s, uint32_t* from, uint32_t* to) const {
        if (!s.len) return to;
        uint32_t* end = close_run(s.start, s.len, s.cross, s.letter, from, to);
        s.len = 0, s.cross = 0;
        return end;
    }
    uint32_t* close(uint32_t* from, uint32_t* to) { return close(state_, from, to); }
    State state() const { return state_; }
    void save(const State& s) { state_ = s; }

  private:
    uint32_t* close_run(uint32_t* start, size_t len, uint64_t cross, bool letter, uint32_t* from, uint32_t* to) const;

    const SuperwordTables& t_;
    const uint8_t* flags_;
    size_t words_;
    State state_;
};

}  // namespace bpe
