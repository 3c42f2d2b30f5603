// The merge loop's pair table and word lists (trainer.cpp): its largest structures on text, sized per distinct pair.
//
// On the 0.3 GB scale corpus (1.01M words, 868,019 distinct pairs by the end of a 16,384-token run) the pair table
// with 24-byte slots was 48 MiB, plus the old table's 24 MiB while it doubled near the end of the loop: the peak.
// 16-byte slots hold the same (a 48-bit key, a 48-bit count, the words' 32-bit place) wherever every count fits 48
// bits; the loop checks the pair total up front and takes the 24-byte slots otherwise, so no count is ever cut.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

namespace bpe {

// Where a pair's words are: kNoList (none recorded), a word index (below kListBit: the one word that holds the
// pair, no list: most pairs) or kListBit | n (word list n of WordLists).
constexpr uint32_t kNoList = ~uint32_t(0);
constexpr uint32_t kListBit = uint32_t(1) << 31;
constexpr uint64_t kMaxPairTokens = (uint64_t(1) << 24) - 1;  // token ids below this fit the packed key
constexpr int64_t kMaxPackedCount = (int64_t(1) << 48) - 1;

// 16 bytes: left and right ids of 24 bits each in the key (a pair key is left << 32 | right everywhere else).
struct PackedPairSlot {
    static constexpr uint64_t kEmpty = (uint64_t(1) << 48) - 1;  // ids stay below 2**24 - 1: no key reaches it
    uint64_t key48 : 48;
    uint64_t count_hi : 16;
    uint32_t count_lo;
    uint32_t where;

    static uint64_t stored(uint64_t key) { return (key >> 32) << 24 | (key & 0xFFFFFF); }
    uint64_t stored_key() const { return key48; }
    uint64_t key() const { return (uint64_t(key48) >> 24) << 32 | (key48 & 0xFFFFFF); }
    int64_t count() const { return static_cast<int64_t>(uint64_t(count_hi) << 32 | count_lo); }
    void set_count(int64_t c) {
        count_hi = static_cast<uint64_t>(c) >> 32;
        count_lo = static_cast<uint32_t>(c);
    }
    void reset(uint64_t stored_key) {
        key48 = stored_key;
        set_count(0);
        where = kNoList;
    }
};
static_assert(sizeof(PackedPairSlot) == 16, "a packed pair slot is 16 bytes");

// 24 bytes: any int64 count (pair totals of 2**48 and more: weighted counts).
struct WidePairSlot {
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    uint64_t key_;
    int64_t count_;
    uint32_t where;

    static uint64_t stored(uint64_t key) { return key; }
    uint64_t stored_key() const { return key_; }
    uint64_t key() const { return key_; }
    int64_t count() const { return count_; }
    void set_count(int64_t c) { count_ = c; }
    void reset(uint64_t stored_key) {
        key_ = stored_key;
        count_ = 0;
        where = kNoList;
    }
};

// Pair key -> slot, linear probing at load <= 0.7 over a power-of-two table, hashed on the full pair key: the slots
// (and the order for_each visits them in) are where U64Map put them, whatever the slot type.
template <class Slot>
class PairTable {
  public:
    explicit PairTable(size_t expected) {
        size_t cap = 16;
        while (full(expected, cap)) cap <<= 1;
        rehash(cap);
    }

    Slot* find(uint64_t key) {
        const uint64_t stored = Slot::stored(key);
        for (size_t i = index(key);; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (s.stored_key() == stored) return &s;
            if (s.stored_key() == Slot::kEmpty) return nullptr;
        }
    }

    // The slot of key, inserted with count 0 and no words if absent.
    Slot& operator[](uint64_t key) {
        const uint64_t stored = Slot::stored(key);
        for (size_t i = index(key);; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (s.stored_key() == stored) return s;
            if (s.stored_key() == Slot::kEmpty) {
                if (full(size_ + 1, slots_.size())) {
                    rehash(slots_.size() * 2);
                    return (*this)[key];
                }
                s.reset(stored);
                ++size_;
                return s;
            }
        }
    }

    size_t size() const { return size_; }
    size_t memory_bytes() const { return slots_.capacity() * sizeof(Slot); }
    template <class F>
    void for_each(F&& f) const {
        for (const Slot& s : slots_)
            if (s.stored_key() != Slot::kEmpty) f(s);
    }

  private:
    static bool full(size_t n, size_t cap) { return 10 * n > 7 * cap; }
    size_t index(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
    void rehash(size_t cap) {
        std::vector<Slot> old;
        old.swap(slots_);
        Slot empty;
        empty.reset(Slot::kEmpty);
        slots_.assign(cap, empty);
        mask_ = cap - 1;
        shift_ = 64 - __builtin_ctzll(cap);
        for (const Slot& s : old) {
            if (s.stored_key() == Slot::kEmpty) continue;
            size_t i = index(s.key());
            while (slots_[i].stored_key() != Slot::kEmpty) i = (i + 1) & mask_;
            slots_[i] = s;
        }
    }

    std::vector<Slot> slots_;
    size_t mask_ = 0;
    int shift_ = 64;
    size_t size_ = 0;
};

// The word lists of pairs held by more than one word (stale entries allowed): each one malloc block holding its size
// and capacity before the words, its number the 31 bits of the pair's slot. A std::vector per list cost a 24-byte
// header besides the same block: 304,080 lists, a 12.6 MB vector of headers on the 0.3 GB scale corpus.
class WordLists {
  public:
    struct Free {
        void operator()(uint32_t* block) const { std::free(block); }
    };
    // A detached list: its words stay readable while the lists change; freed with it.
    class Taken {
      public:
        explicit Taken(uint32_t* block) : block_(block) {}
        const uint32_t* data() const { return block_.get() + 2; }
        size_t size() const { return block_.get()[0]; }

      private:
        std::unique_ptr<uint32_t, Free> block_;
    };

    WordLists() = default;
    WordLists(const WordLists&) = delete;
    WordLists& operator=(const WordLists&) = delete;
    ~WordLists() {
        for (uint32_t* b : blocks_) std::free(b);
    }

    // A new list holding first and second; its number.
    uint32_t make(uint32_t first, uint32_t second) {
        if (free_.empty()) {
            if (blocks_.size() >= kListBit - 1) throw std::length_error("more than 2**31 - 2 word lists");
            free_.push_back(static_cast<uint32_t>(blocks_.size()));
            blocks_.push_back(nullptr);
        }
        const uint32_t n = free_.back();
        uint32_t* b = allocate(nullptr, 4);  // 24 bytes: malloc's smallest block holds the header and 4 words
        free_.pop_back();
        b[0] = 2;
        b[2] = first;
        b[3] = second;
        blocks_[n] = b;
        return n;
    }

    // Append word to list n unless it is already the last.
    void push(uint32_t n, uint32_t word) {
        uint32_t* b = blocks_[n];
        if (b[b[0] + 1] == word) return;
        if (b[0] == b[1]) b = blocks_[n] = allocate(b, 2 * b[1]);  // capacities 4, 8, 16: 16-byte multiples
        b[2 + b[0]++] = word;
    }

    // List n detached (its number free for reuse).
    Taken take(uint32_t n) {
        Taken t(blocks_[n]);
        blocks_[n] = nullptr;
        free_.push_back(n);
        return t;
    }

    void release(uint32_t n) { take(n); }

    size_t lists() const { return blocks_.size() - free_.size(); }
    uint64_t memory_bytes() const {  // the blocks with malloc's 8-byte header, the list numbers
        uint64_t bytes = blocks_.capacity() * sizeof(uint32_t*) + free_.capacity() * 4;
        for (const uint32_t* b : blocks_)
            if (b) bytes += 16 + 4 * uint64_t(b[1]);
        return bytes;
    }

  private:
    static uint32_t* allocate(uint32_t* old, uint32_t capacity) {
        auto* b = static_cast<uint32_t*>(std::realloc(old, 8 + 4 * size_t(capacity)));
        if (!b) throw std::bad_alloc();
        b[1] = capacity;
        return b;
    }

    std::vector<uint32_t*> blocks_;
    std::vector<uint32_t> free_;
};

}  // namespace bpe
