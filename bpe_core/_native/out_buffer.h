// Output memory that stays mapped between calls (issue 37 item 2): the ids and offsets arrays of the flat encode
// are regions of anonymous memory lent to NumPy and taken back when NumPy frees them, so that a warm call writes to
// pages that are already there.
//
// Before: the ids went to a buffer grown by realloc from 4 KB (copies), handed to NumPy and unmapped with it, then
// faulted in again on the next call: 3,086 minor page faults on every warm call of 10 MB (12.6 MB of ids), 10-25%
// of a warm call's CPU time (encoder-engine-2.md section 4). A region is reserved once at its upper bound (a token
// is at least one byte, so a text of n UTF-8 bytes has at most n ids), 2 MiB-aligned with MADV_HUGEPAGE when it is
// large, so that even its first use faults once per 2 MiB instead of once per 4 KB; the part never written costs
// address space only.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

namespace bpe {

// A mapping of `capacity` bytes at `data` (nullptr: none); `touched` is how far it has ever been written (what it
// holds in memory, at most).
struct Region {
    uint8_t* data = nullptr;
    size_t capacity = 0;
    size_t touched = 0;
};

// Free regions kept for later calls. Small requests (below kMinRegion) are left to malloc, whose heap keeps them
// mapped anyway.
class RegionPool : public std::enable_shared_from_this<RegionPool> {
  public:
    static constexpr size_t kHuge = size_t(2) << 20;
    static constexpr size_t kMinRegion = size_t(64) << 10;
    // A call takes two (ids, offsets) and the caller usually still holds the previous call's two while the next
    // call runs: four free regions keep a loop of calls at zero faults. Beyond the bytes below, free regions are
    // unmapped (a worker that once encoded a huge batch does not keep its memory forever).
    static constexpr size_t kKeepRegions = 4;
    static constexpr size_t kKeepTouched = size_t(512) << 20;

    RegionPool() = default;
    RegionPool(const RegionPool&) = delete;
    RegionPool& operator=(const RegionPool&) = delete;
    ~RegionPool() {
        for (Region& r : free_) unmap(r);
    }

    // A region of at least `bytes` (the smallest free one that fits, else a new mapping). Throws bad_alloc.
    Region take(size_t bytes) {
        bytes = std::max<size_t>(bytes, 1);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            size_t best = free_.size();
            for (size_t i = 0; i < free_.size(); ++i)
                if (free_[i].capacity >= bytes && (best == free_.size() || free_[i].capacity < free_[best].capacity))
                    best = i;
            if (best != free_.size()) {
                Region r = free_[best];
                free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
                return r;
            }
        }
        return map(bytes);
    }

    // A region back to the pool (kept while the pool holds few, else unmapped).
    void give(Region r) {
        if (!r.data) return;
        std::lock_guard<std::mutex> lock(mutex_);
        free_.push_back(r);
        // Over the bound: drop the least touched first (the big, warm ones are what the next call wants).
        while (free_.size() > kKeepRegions || touched_locked() > kKeepTouched) {
            auto it = std::min_element(free_.begin(), free_.end(),
                                       [](const Region& a, const Region& b) { return a.touched < b.touched; });
            unmap(*it);
            free_.erase(it);
        }
    }

    // Every free region unmapped (Encoder.clear_cache).
    void clear() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (Region& r : free_) unmap(r);
        free_.clear();
    }

    size_t free_regions() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return free_.size();
    }

  private:
    size_t touched_locked() const {
        size_t n = 0;
        for (const Region& r : free_) n += r.touched;
        return n;
    }
    // Capacity rounded up to a power of two: calls of similar size then fit each other's regions (only what is
    // written is ever backed by memory).
    static Region map(size_t bytes) {
        size_t capacity = kMinRegion;
        while (capacity < bytes) capacity <<= 1;
        Region r;
        r.capacity = capacity;
        if (capacity < kHuge) {
            void* m = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
            if (m == MAP_FAILED) throw std::bad_alloc();
            r.data = static_cast<uint8_t*>(m);
            return r;
        }
        // 2 MiB-aligned: map one huge page more, cut the unaligned head and tail.
        const size_t span = capacity + kHuge;
        void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) throw std::bad_alloc();
        uint8_t* raw = static_cast<uint8_t*>(m);
        uint8_t* aligned =
            reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) & ~uintptr_t(kHuge - 1));
        if (aligned > raw) munmap(raw, static_cast<size_t>(aligned - raw));
        const size_t tail = static_cast<size_t>(raw + span - (aligned + capacity));
        if (tail) munmap(aligned + capacity, tail);
#ifdef MADV_HUGEPAGE
        madvise(aligned, capacity, MADV_HUGEPAGE);
#endif
        r.data = aligned;
        return r;
    }
    static void unmap(Region& r) {
        if (r.data) munmap(r.data, r.capacity);
        r.data = nullptr;
    }

    mutable std::mutex mutex_;
    std::vector<Region> free_;
};

// Memory for one output array: a region from the pool (large), or malloc (small). Moved into the owner of the
// NumPy array it becomes (lend), which gives it back when NumPy frees the array.
class OutBuffer {
  public:
    OutBuffer() = default;
    OutBuffer(std::shared_ptr<RegionPool> pool, size_t bytes) {
        if (bytes >= RegionPool::kMinRegion && pool) {
            region_ = pool->take(bytes);
            pool_ = std::move(pool);
        } else {
            region_.data = static_cast<uint8_t*>(std::malloc(std::max<size_t>(bytes, 1)));
            if (!region_.data) throw std::bad_alloc();
            region_.capacity = bytes;
        }
    }
    OutBuffer(const OutBuffer&) = delete;
    OutBuffer& operator=(const OutBuffer&) = delete;
    OutBuffer(OutBuffer&& o) noexcept : pool_(std::move(o.pool_)), region_(o.region_) { o.region_ = Region{}; }
    OutBuffer& operator=(OutBuffer&& o) noexcept {
        if (this != &o) {
            release();
            pool_ = std::move(o.pool_);
            region_ = o.region_;
            o.region_ = Region{};
        }
        return *this;
    }
    ~OutBuffer() { release(); }

    uint8_t* data() const { return region_.data; }
    size_t capacity() const { return region_.capacity; }
    template <class T>
    T* as() const {
        return reinterpret_cast<T*>(region_.data);
    }
    // Record that the first `bytes` have been written (the pool's bound on what it keeps in memory).
    void wrote(size_t bytes) { region_.touched = std::max(region_.touched, std::min(bytes, region_.capacity)); }

  private:
    void release() {
        if (!region_.data) return;
        if (pool_)
            pool_->give(region_);
        else
            std::free(region_.data);
        region_ = Region{};
        pool_.reset();
    }
    std::shared_ptr<RegionPool> pool_;
    Region region_;
};

}  // namespace bpe
