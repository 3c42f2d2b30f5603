// Per-thread caches kept between calls: a pool lends each encoding thread a cache of its own (the byte-level
// encoder's ChunkCache, the SentencePiece-style encoder's SpmCache) and takes it back after, so caches stay warm
// across calls and no two threads, nor two Python threads calling one tokenizer at once, ever share one.
// T needs clear() (drop what it learnt) and size() (entries learnt).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace bpe {

template <class T>
class Pool {
  public:
    static constexpr size_t kKeep = 64;  // enough for every thread of a machine, not one per thread ever asked for

    std::unique_ptr<T> acquire() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (free_.empty()) return std::make_unique<T>();
        std::unique_ptr<T> cache = std::move(free_.back());
        free_.pop_back();
        return cache;
    }
    void release(std::unique_ptr<T> cache) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (free_.size() < kKeep) free_.push_back(std::move(cache));
    }
    void clear() {  // the caches not lent out now
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& cache : free_) cache->clear();
    }
    size_t size() const {  // entries in the caches not lent out now
        std::lock_guard<std::mutex> lock(mutex_);
        size_t n = 0;
        for (const auto& cache : free_) n += cache->size();
        return n;
    }

  private:
    mutable std::mutex mutex_;
    std::vector<std::unique_ptr<T>> free_;
};

// A cache borrowed from a pool for one scope.
template <class T>
class Lease {
  public:
    explicit Lease(Pool<T>& pool) : pool_(pool), cache_(pool.acquire()) {}
    ~Lease() { pool_.release(std::move(cache_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    T* get() { return cache_.get(); }

  private:
    Pool<T>& pool_;
    std::unique_ptr<T> cache_;
};

}  // namespace bpe
