// Python bindings of the SentencePiece-style encoder (spm.h): SpmEncoder(...).encode / encode_flat /
// encode_flat_arrow. Texts are read with the GIL held, encoded without it, on up to `threads` threads, each with its
// own word cache, borrowed from the encoder's pool and kept for later calls.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unordered_map.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>
#include <thread>

#include "cache_pool.h"
#include "spm.h"

namespace nb = nanobind;
using namespace bpe;

void bind_spm(nb::module_& m);

namespace {


struct PySpmEncoder {
    SpmEncoder enc;
    Pool<Cache> caches;  // each thread of a call borrows one; kept warm for the next call
};

template <class T>
nb::object numpy_array(std::vector<T>&& values) {
    auto* data = new std::vector<T>(std::move(values));
    nb::capsule owner(data, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(data->data(), {data->size()}, owner));
}

// A NumPy array over n values of malloc'd memory, which the array then owns.
template <class T>
nb::object lend_malloc(T* data, size_t n) {
    if (!data) data = static_cast<T*>(std::malloc(sizeof(T)));
    if (!data) throw std::bad_alloc();
    nb::capsule owner(data, [](void* p) noexcept { std::free(p); });
    return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(data, {n}, owner));
}

// Each text's ids, texts split over threads in contiguous ranges (results joined in input order). Each part's
// buffer is reserved once at its bound (address space: only what is written is memory).
nb::object encode_views(PySpmEncoder& self, const std::vector<std::string_view>& texts, size_t threads, bool wide) {
    const size_t n = texts.size();
    size_t total_bytes = 0;
    for (auto t : texts) total_bytes += t.size();
    threads = std::max<size_t>(1, std::min({threads, n, std::max<size_t>(1, total_bytes >> 16)}));
    std::vector<IdBuffer> parts(threads);
    std::vector<int64_t> counts(n, 0);
    // Part p takes the texts whose bytes start in the p-th equal share of the total (a few long texts among short
    // ones would otherwise leave a thread with most of the work).
    std::vector<size_t> cuts(threads + 1, n);
    cuts[0] = 0;
    for (size_t i = 0, p = 1, seen = 0; i < n && p < threads; ++i) {
        while (p < threads && seen >= total_bytes / threads * p) cuts[p++] = i;
        seen += texts[i].size();
    }
    {
        nb::gil_scoped_release release;
        const auto run = [&](size_t part) {
            Lease<Cache> cache(self.caches);
            const size_t a = cuts[part], b = cuts[part + 1];
            IdBuffer& out = parts[part];
            size_t bound = 0;
            for (size_t i = a; i < b; ++i) bound += SpmEncoder::max_ids(texts[i].size());
            out.reserve_more(bound);
            for (size_t i = a; i < b; ++i) {
                const size_t before = out.size();
                self.enc.encode(texts[i], true, true, out, *cache.get());
                counts[i] = static_cast<int64_t>(out.size() - before);
            }
        };
        std::vector<std::thread> workers;
        for (size_t p = 1; p < threads; ++p) workers.emplace_back(run, p);
        run(0);
        for (auto& w : workers) w.join();
    }
    std::vector<int64_t> offsets(n + 1, 0);
    for (size_t i = 0; i < n; ++i) offsets[i + 1] = offsets[i] + counts[i];
    const size_t total = static_cast<size_t>(offsets[n]);
    nb::object ids;
    if (wide && threads == 1) {  // the part's own memory becomes the array (int32 ids below 2**31 read as uint32)
        ids = lend_malloc(reinterpret_cast<uint32_t*>(parts[0].release()), total);
    } else if (wide) {
        auto* out = static_cast<uint32_t*>(std::malloc(std::max<size_t>(total, 1) * sizeof(uint32_t)));
        if (!out) throw std::bad_alloc();
        size_t at = 0;
        for (auto& p : parts) {
            std::memcpy(out + at, p.data(), p.size() * sizeof(uint32_t));
            at += p.size();
        }
        ids = lend_malloc(out, total);
    } else {
        auto* out = static_cast<uint16_t*>(std::malloc(std::max<size_t>(total, 1) * sizeof(uint16_t)));
        if (!out) throw std::bad_alloc();
        size_t at = 0;
        for (auto& p : parts)
            for (size_t k = 0; k < p.size(); ++k) out[at++] = static_cast<uint16_t>(p.data()[k]);
        ids = lend_malloc(out, total);
    }
    return nb::make_tuple(ids, numpy_array(std::move(offsets)));
}

int64_t first_invalid(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    for (size_t i = 0; i < s.size();) {
        uint32_t cp;
        const int n = utf8_length(p + i, s.size() - i, &cp);
        if (n == 0) return static_cast<int64_t>(i);
        i += n;
    }
    return -1;
}

int64_t arrow_offset(uintptr_t offsets, int width, size_t i) {
    if (width == 4) {
        int32_t v;
        std::memcpy(&v, reinterpret_cast<const char*>(offsets) + 4 * i, 4);
        return v;
    }
    int64_t v;
    std::memcpy(&v, reinterpret_cast<const char*>(offsets) + 8 * i, 8);
    return v;
}

}  // namespace

void bind_spm(nb::module_& m) {
    nb::class_<PySpmEncoder>(m, "SpmEncoder")
        .def(
            "__init__",
            [](PySpmEncoder* self, uint32_t n_vocab, bool byte_fallback, int32_t unk_id, bool fuse_unk,
               bool add_dummy_prefix, bool remove_extra_whitespaces, bool escape_whitespaces, bool cut_words,
               bool split_newlines, const std::vector<std::pair<uint32_t, int32_t>>& chars,
               const std::vector<uint64_t>& pair_keys, const std::vector<uint64_t>& pair_values,
               const std::vector<int32_t>& byte_ids, const std::unordered_map<std::string, int32_t>& whole,
               const std::vector<std::pair<std::string, int32_t>>& users) {
                if (pair_keys.size() != pair_values.size()) throw nb::value_error("pair keys and values differ");
                if (byte_ids.size() != 256) throw nb::value_error("byte_ids must hold 256 ids");
                SpmConfig c;
                c.n_vocab = n_vocab;
                c.byte_fallback = byte_fallback;
                c.unk_id = unk_id;
                c.fuse_unk = fuse_unk;
                c.add_dummy_prefix = add_dummy_prefix;
                c.remove_extra_whitespaces = remove_extra_whitespaces;
                c.escape_whitespaces = escape_whitespaces;
                c.cut_words = cut_words;
                c.split_newlines = split_newlines;
                c.newline_runs = split_newlines && !whole.empty();
                new (self) PySpmEncoder{SpmEncoder(c, chars, pair_keys, pair_values, byte_ids, whole, users), {}};
            },
            nb::arg("n_vocab"), nb::arg("byte_fallback"), nb::arg("unk_id"), nb::arg("fuse_unk"),
            nb::arg("add_dummy_prefix"), nb::arg("remove_extra_whitespaces"), nb::arg("escape_whitespaces"),
            nb::arg("cut_words"), nb::arg("split_newlines"), nb::arg("chars"), nb::arg("pair_keys"),
            nb::arg("pair_values"), nb::arg("byte_ids"), nb::arg("whole"), nb::arg("users"))
        .def(
            "encode",
            [](PySpmEncoder& self, nb::bytes text, bool normalize, bool prefix) {
                std::string_view s(text.c_str(), text.size());
                IdBuffer out;
                {
                    nb::gil_scoped_release release;
                    Lease<Cache> cache(self.caches);
                    self.enc.encode(s, normalize, prefix, out, *cache.get());
                }
                return std::vector<int32_t>(out.data(), out.data() + out.size());
            },
            "The ids of one text given as UTF-8 bytes (normalized here when `normalize`).")
        .def(
            "encode_flat",
            [](PySpmEncoder& self, nb::list texts, size_t threads, bool wide) {
                if (threads < 1) throw nb::value_error("num_threads must be at least 1");
                std::vector<std::string_view> views;
                views.reserve(texts.size());
                for (nb::handle t : texts) {
                    Py_ssize_t size = 0;
                    const char* data = PyUnicode_AsUTF8AndSize(t.ptr(), &size);
                    if (!data) throw nb::python_error();
                    views.emplace_back(data, static_cast<size_t>(size));
                }
                return encode_views(self, views, threads, wide);
            },
            "(ids, offsets) of whole texts (str), each with the dummy prefix.")
        .def(
            "encode_flat_arrow",
            [](PySpmEncoder& self, uintptr_t offsets, int width, uintptr_t data, size_t data_size, size_t n,
               size_t threads, bool wide) -> nb::object {
                if (threads < 1) throw nb::value_error("num_threads must be at least 1");
                std::vector<std::string_view> views;
                views.reserve(n);
                for (size_t i = 0; i < n; ++i) {
                    const int64_t a = arrow_offset(offsets, width, i), b = arrow_offset(offsets, width, i + 1);
                    if (a < 0 || b < a || static_cast<uint64_t>(b) > data_size)
                        return nb::make_tuple(nb::none(), i, "offsets", 0);
                    std::string_view s(reinterpret_cast<const char*>(data) + a, static_cast<size_t>(b - a));
                    const int64_t bad = first_invalid(s);
                    if (bad >= 0) return nb::make_tuple(nb::none(), i, "utf8", bad);
                    views.push_back(s);
                }
                return encode_views(self, views, threads, wide);
            },
            "encode_flat over an Arrow string array's buffers; (None, index, problem, byte) for a bad element.");
}
