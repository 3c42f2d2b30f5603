// Python bindings of the native chunk counter (bpe_core._native._core.ChunkCounter), count_chunks' engine.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "batch.h"
#include "bindings.h"
#include "counts.h"
#include "pretok.h"

namespace nb = nanobind;
using namespace bpe;
using namespace bpe_bindings;

nb::tuple sorted_table(CountsColumns&& t);  // counts_bindings.cpp

namespace {


// count_chunks with a hand-written pre-tokenizer: every piece of every text counted in a native hash map (one per
// thread, merged when read), without the GIL. Texts are whole user texts: str (lone surrogates replaced as
// tiktoken does) or bytes (invalid UTF-8 split as its surrogateescape decoding).
class PyChunkCounter {
  public:
    explicit PyChunkCounter(nb::handle kind_name) : kind_(parse_kind(kind_name)) {
        if (kind_ == Pretok::kNone) throw nb::value_error("ChunkCounter needs a hand-written pre-tokenizer name");
        maps_.push_back(std::make_unique<CountMap>());
    }
    PyChunkCounter(const PyChunkCounter&) = delete;
    PyChunkCounter& operator=(const PyChunkCounter&) = delete;

    void add(nb::handle texts, size_t num_threads) {
        nb::object tuple = nb::steal(sequence_tuple(texts, "texts"));
        size_t n = static_cast<size_t>(PyTuple_GET_SIZE(tuple.ptr()));
        std::vector<Source> sources;
        sources.reserve(n);
        for (size_t d = 0; d < n; ++d) sources.push_back(text_source(PyTuple_GET_ITEM(tuple.ptr(), d), true));
        if (n == 0) return;
        size_t threads = threads_for(num_threads, n, units_of(sources, 0, n));
        while (maps_.size() < threads) maps_.push_back(std::make_unique<CountMap>());
        std::vector<size_t> needs_gil;
        std::exception_ptr error;
        std::mutex mutex;
        std::atomic<size_t> next{0};
        std::atomic<bool> stop{false};
        SignalCheck caller_check(&stop);  // the calling thread (worker 0) runs the signal handlers
        auto work = [&](size_t w) {
            FlagCheck flag_check(stop);
            StopScope scope(w == 0 ? static_cast<StopCheck*>(&caller_check) : &flag_check);
            try {
                Scratch scratch;
                CountMap& map = *maps_[w];
                for (size_t d; !stop.load(std::memory_order_relaxed) && (d = next.fetch_add(1)) < n;) {
                    const uint8_t* p;
                    size_t size;
                    if (!utf8_of(sources[d], scratch.utf8, &p, &size)) {
                        std::lock_guard<std::mutex> lock(mutex);
                        needs_gil.push_back(d);
                        continue;
                    }
                    count(p, size, scratch.ends, map);
                    if (stop_requested()) break;
                }
            } catch (...) {
                std::lock_guard<std::mutex> lock(mutex);
                if (!error) error = std::current_exception();
                stop.store(true);
            }
        };
        {
            nb::gil_scoped_release release;
            std::vector<std::thread> workers;
            try {
                for (size_t w = 1; w < threads; ++w) workers.emplace_back(work, w);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mutex);
                if (!error) error = std::current_exception();
            }
            work(0);
            for (auto& t : workers) t.join();
        }
        caller_check.raise_if_stopped();  // the counts are partial: the caller's counter is dropped
        if (error) std::rethrow_exception(error);
        std::sort(needs_gil.begin(), needs_gil.end());
        std::vector<size_t> ends;
        for (size_t d : needs_gil) {
            nb::bytes data = utf8_with_gil(sources[d]);
            count(reinterpret_cast<const uint8_t*>(data.c_str()), data.size(), ends, *maps_[0]);
        }
    }

    // piece bytes -> count
    nb::dict to_dict() {
        merge_threads();
        nb::dict out;
        maps_[0]->for_each([&](const uint8_t* p, size_t n, uint64_t c) {
            nb::object key = nb::steal(PyBytes_FromStringAndSize(reinterpret_cast<const char*>(p), Py_ssize_t(n)));
            nb::object value = nb::steal(PyLong_FromUnsignedLongLong(c));
            if (!key.is_valid() || !value.is_valid() || PyDict_SetItem(out.ptr(), key.ptr(), value.ptr()) < 0)
                throw nb::python_error();
        });
        return out;
    }

    // Distinct pieces so far (after merging the threads' maps).
    size_t size() {
        merge_threads();
        return maps_[0]->size();
    }

    // The counts as sorted tables, one per hash shard (crc32 % num_shards), counts times weight, and their weighted
    // sum; the counter is emptied. [(shard, (offsets, data, counts)), ...] for the non-empty shards.
    nb::tuple take_sorted(uint32_t num_shards, int64_t weight) {
        if (num_shards == 0) throw nb::value_error("num_shards must be at least 1");
        if (weight < 1) throw nb::value_error("weight must be a positive integer");
        merge_threads();
        std::vector<CountsColumns> shards;
        unsigned __int128 total = 0;
        {
            nb::gil_scoped_release release;
            shards = sorted_shards(*maps_[0], num_shards, weight, &total);
            maps_[0] = std::make_unique<CountMap>();
        }
        nb::list out;
        for (uint32_t k = 0; k < num_shards; ++k)
            if (!shards[k].counts.empty()) out.append(nb::make_tuple(k, sorted_table(std::move(shards[k]))));
        nb::object hi = nb::steal(PyLong_FromUnsignedLongLong(static_cast<uint64_t>(total >> 64)));
        nb::object lo = nb::steal(PyLong_FromUnsignedLongLong(static_cast<uint64_t>(total)));
        return nb::make_tuple(out, (hi << nb::int_(64)) | lo);
    }

  private:
    void merge_threads() {
        nb::gil_scoped_release release;
        for (size_t w = 1; w < maps_.size(); ++w) {
            maps_[0]->merge(*maps_[w]);
            maps_[w] = std::make_unique<CountMap>();
        }
    }

    void count(const uint8_t* p, size_t n, std::vector<size_t>& ends, CountMap& map) const {
        ends.clear();
        pretok_split(kind_, p, n, ends);
        size_t start = 0, pieces = 0;
        for (size_t end : ends) {
            if (++pieces % (64 * kPollPieces) == 0 && stop_requested()) return;
            map.add(p + start, end - start);
            start = end;
        }
    }

    Pretok kind_;
    std::vector<std::unique_ptr<CountMap>> maps_;
};
}  // namespace

void bind_counter(nb::module_& m) {
    nb::class_<PyChunkCounter>(m, "ChunkCounter")
        .def(nb::init<nb::handle>(), nb::arg("kind"))
        .def("add", &PyChunkCounter::add, nb::arg("texts"), nb::arg("num_threads"))
        .def("to_dict", &PyChunkCounter::to_dict)
        .def("size", &PyChunkCounter::size)
        .def("take_sorted", &PyChunkCounter::take_sorted, nb::arg("num_shards"), nb::arg("weight"));
}
