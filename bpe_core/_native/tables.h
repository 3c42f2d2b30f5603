// Open-addressing hash tables used by the encoder and the trainer.
//
// Linear probing at load factor <= 0.5 over flat slots: one cache line per lookup in the common case, where
// std::unordered_map costs a heap node per entry and a pointer chase per probe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace bpe {

constexpr uint64_t kNoMerge = uint64_t(1) << 62;  // as bpe_core.model.merges.NO_MERGE
constexpr uint64_t kIdMask = (uint64_t(1) << 32) - 1;

inline uint64_t mix64(uint64_t a, uint64_t b) {
    __uint128_t r = static_cast<__uint128_t>(a) * b;
    return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

// A wyhash-style hash of a byte string: 8 bytes per multiply, good enough for tokens and pre-token pieces.
inline uint64_t hash_bytes(const uint8_t* p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xA0761D6478BD642Full);
    while (n >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        h = mix64(h ^ w, 0xE7037ED1A0B428DBull);
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        std::memcpy(&w, p, n);
        h = mix64(h ^ w ^ (uint64_t(n) << 56), 0x8EBC6AF09C88C6E3ull);
    }
    return mix64(h, 0x589965CC75374CC3ull);
}

inline size_t table_capacity(size_t n) {  // power of two, load factor <= 0.5
    size_t cap = 16;
    while (cap < 2 * n + 2) cap <<= 1;
    return cap;
}

// uint64 key -> V. The key ~0 is reserved as "empty"; pair keys (left << 32 | right) never reach it.
// Load factor up to 0.7 (not 0.5): the trainer's pair table is its largest structure on text with many distinct
// pairs (2M synthetic chunks: 4.6M pairs in a 400 MB table at <= 0.5, plus the old table while rehashing).
template <class V>
class U64Map {
  public:
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    struct Slot {
        uint64_t key;
        V value;
    };

    explicit U64Map(size_t expected = 0) {
        size_t cap = 16;
        while (full(expected, cap)) cap <<= 1;
        rehash(cap);
    }

    const V* find(uint64_t key) const {
        size_t i = index(key);
        while (true) {
            const Slot& s = slots_[i];
            if (s.key == key) return &s.value;
            if (s.key == kEmpty) return nullptr;
            i = (i + 1) & mask_;
        }
    }
    V* find(uint64_t key) { return const_cast<V*>(static_cast<const U64Map*>(this)->find(key)); }
    void prefetch(uint64_t key) const { __builtin_prefetch(&slots_[index(key)]); }

    // The value for key, default-constructed if absent.
    V& operator[](uint64_t key) {
        size_t i = index(key);
        while (true) {
            Slot& s = slots_[i];
            if (s.key == key) return s.value;
            if (s.key == kEmpty) {
                if (full(size_ + 1, slots_.size())) {
                    rehash(slots_.size() * 2);
                    return (*this)[key];
                }
                s.key = key;
                s.value = V();
                ++size_;
                return s.value;
            }
            i = (i + 1) & mask_;
        }
    }

    size_t size() const { return size_; }
    size_t memory_bytes() const { return slots_.capacity() * sizeof(Slot); }
    template <class F>
    void for_each(F&& f) const {
        for (const Slot& s : slots_)
            if (s.key != kEmpty) f(s.key, s.value);
    }

  private:
    static bool full(size_t n, size_t cap) { return 10 * n > 7 * cap; }
    size_t index(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
    void rehash(size_t cap) {
        std::vector<Slot> old;
        old.swap(slots_);
        slots_.assign(cap, Slot{kEmpty, V()});
        mask_ = cap - 1;
        shift_ = 64 - __builtin_ctzll(cap);
        size_ = 0;
        for (const Slot& s : old) {
            if (s.key == kEmpty) continue;
            size_t i = index(s.key);
            while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
            slots_[i] = s;
            ++size_;
        }
    }

    std::vector<Slot> slots_;
    size_t mask_ = 0;
    int shift_ = 64;
    size_t size_ = 0;
};

// byte string -> uint32 value, keys copied into one arena. Insert-only; clear() drops everything.
//
// A compact index (4 bytes per slot: 8 bits of hash as a tag, 24 bits of entry number) over entries kept in
// insertion order. A vocabulary inserted by id keeps its frequent tokens (low ranks) together, so the entries a
// text touches stay in cache; the tag rejects most collisions without touching an entry. Before: 32-byte slots
// at load <= 0.5, 16.8 MB for o200k, and find_hashed was the top symbol of encode_batch in perf (15% of samples).
class BytesMap {
  public:
    static constexpr uint32_t kMissing = ~uint32_t(0);
    static constexpr size_t kMaxEntries = (size_t(1) << 24) - 1;

    explicit BytesMap(size_t expected = 0) {
        entries_.reserve(expected);
        rehash(table_capacity(expected));
    }

    uint32_t find(const uint8_t* p, size_t n) const { return find_hashed(p, n, hash_bytes(p, n)); }

    uint32_t find_hashed(const uint8_t* p, size_t n, uint64_t h) const {
        size_t i = h & mask_;
        const uint32_t tag = tag_of(h);
        const uint64_t head = prefix(p, n);
        while (true) {
            const uint32_t slot = index_[i];
            if (slot == 0) return kMissing;
            if ((slot & kTagMask) == tag) {
                const Entry& e = entries_[(slot & kEntryMask) - 1];
                if (e.hash == h && e.len == n && e.head == head &&
                    (n <= 8 || std::memcmp(arena_.data() + e.offset + 8, p + 8, n - 8) == 0))
                    return e.value;
            }
            i = (i + 1) & mask_;
        }
    }

    // Insert (keeps the first value for a key already present). Returns false when the map is full (2**24 - 1).
    bool insert_hashed(const uint8_t* p, size_t n, uint64_t h, uint32_t value) {
        if (find_hashed(p, n, h) != kMissing) return true;
        if (entries_.size() >= kMaxEntries) return false;
        if (2 * (entries_.size() + 1) > index_.size()) rehash(index_.size() * 2);
        entries_.push_back(Entry{h, prefix(p, n), arena_.size(), static_cast<uint32_t>(n), value});
        arena_.append(reinterpret_cast<const char*>(p), n);
        place(entries_.size());
        return true;
    }
    bool insert(const uint8_t* p, size_t n, uint32_t value) { return insert_hashed(p, n, hash_bytes(p, n), value); }

    size_t size() const { return entries_.size(); }
    void clear() {
        arena_.clear();
        entries_.clear();
        std::fill(index_.begin(), index_.end(), 0u);
    }

  private:
    static constexpr uint32_t kTagMask = 0xFF000000u, kEntryMask = 0x00FFFFFFu;
    struct Entry {
        uint64_t hash;
        uint64_t head;  // the first 8 bytes of the key: short keys never touch the arena
        uint64_t offset;
        uint32_t len;
        uint32_t value;
    };
    static uint32_t tag_of(uint64_t h) { return static_cast<uint32_t>(h >> 56) << 24; }
    static uint64_t prefix(const uint8_t* p, size_t n) {
        uint64_t w = 0;
        std::memcpy(&w, p, n < 8 ? n : 8);
        return w;
    }
    void place(size_t number) {  // entry number is index + 1
        const uint64_t h = entries_[number - 1].hash;
        size_t i = h & mask_;
        while (index_[i] != 0) i = (i + 1) & mask_;
        index_[i] = tag_of(h) | static_cast<uint32_t>(number);
    }
    void rehash(size_t cap) {
        index_.assign(cap, 0u);
        mask_ = cap - 1;
        for (size_t k = 1; k <= entries_.size(); ++k) place(k);
    }

    std::vector<uint32_t> index_;
    std::vector<Entry> entries_;
    std::string arena_;
    size_t mask_ = 0;
};

// byte string -> uint64 count (count_chunks): keys copied into one arena, entries in insertion order behind an index
// of entry numbers (load <= 0.5). No limit on the number of keys but memory, unlike BytesMap's 24-bit entries.
class CountMap {
  public:
    CountMap() { rehash(1024); }

    void add(const uint8_t* p, size_t n, uint64_t h, uint64_t count) {
        size_t i = h & mask_;
        while (true) {
            const uint64_t slot = index_[i];
            if (slot == 0) break;
            Entry& e = entries_[slot - 1];
            if (e.hash == h && e.len == n && std::memcmp(arena_.data() + e.offset, p, n) == 0) {
                e.count += count;
                return;
            }
            i = (i + 1) & mask_;
        }
        entries_.push_back(Entry{h, arena_.size(), count, n});
        arena_.append(reinterpret_cast<const char*>(p), n);
        index_[i] = entries_.size();
        if (2 * entries_.size() > index_.size()) rehash(index_.size() * 2);
    }
    void add(const uint8_t* p, size_t n, uint64_t count = 1) { add(p, n, hash_bytes(p, n), count); }

    // Add every (key, count) of other into this map.
    void merge(const CountMap& other) {
        for (const Entry& e : other.entries_)
            add(reinterpret_cast<const uint8_t*>(other.arena_.data() + e.offset), e.len, e.hash, e.count);
    }

    size_t size() const { return entries_.size(); }
    // f(const uint8_t* key, size_t len, uint64_t count) for each key, in insertion order.
    template <class F>
    void for_each(F&& f) const {
        for (const Entry& e : entries_) f(reinterpret_cast<const uint8_t*>(arena_.data() + e.offset), e.len, e.count);
    }

  private:
    struct Entry {
        uint64_t hash;
        uint64_t offset;
        uint64_t count;
        size_t len;
    };
    void rehash(size_t cap) {
        index_.assign(cap, 0);
        mask_ = cap - 1;
        for (size_t k = 0; k < entries_.size(); ++k) {
            size_t i = entries_[k].hash & mask_;
            while (index_[i] != 0) i = (i + 1) & mask_;
            index_[i] = k + 1;
        }
    }

    std::vector<uint64_t> index_;  // entry number + 1, 0 = empty
    std::vector<Entry> entries_;
    std::string arena_;
    size_t mask_ = 0;
};

}  // namespace bpe
