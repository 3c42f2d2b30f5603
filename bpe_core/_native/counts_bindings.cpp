// Python bindings of the sorted count tables and of the merge loop fed from them (called from module.cpp's
// NB_MODULE): the count stage's per-shard tables and their CombineFn merge, and the driver's ChunkTable, which reads
// counts/*.parquet record batches without a Python object per chunk.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <vector>

#include "counts.h"
#include "trainer.h"

namespace nb = nanobind;
using namespace bpe;

void bind_counts(nb::module_& m);
nb::tuple run_merge_loop(Words w, const std::vector<std::string>& alphabet, uint64_t budget, int64_t min_count,
                         int tie_break, const std::vector<uint32_t>& hf_rank, nb::object progress);  // trainer_bindings.cpp
nb::tuple sorted_table(CountsColumns&& t);

namespace {

using Offsets = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Bytes = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Counts = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

nb::object as_u128(unsigned __int128 v) {
    nb::object hi = nb::steal(PyLong_FromUnsignedLongLong(static_cast<uint64_t>(v >> 64)));
    nb::object lo = nb::steal(PyLong_FromUnsignedLongLong(static_cast<uint64_t>(v)));
    return (hi << nb::int_(64)) | lo;
}

CountsView view_of(const Offsets& offsets, const Bytes& data, const Counts& counts) {
    const size_t n = counts.shape(0);
    if (offsets.shape(0) != n + 1) throw nb::value_error("offsets must have one entry more than counts");
    const int32_t* o = offsets.data();
    const size_t size = data.shape(0);
    for (size_t i = 0; i < n; ++i)
        if (o[i] < 0 || o[i] > o[i + 1]) throw nb::value_error("offsets must be non-decreasing and non-negative");
    if (n && static_cast<size_t>(o[n]) > size) throw nb::value_error("offsets point past the data buffer");
    return CountsView{o, data.data(), counts.data(), n};
}

nb::tuple merge_sorted_counts(nb::list parts) {
    std::vector<nb::object> keep;  // the arrays stay referenced while the merge runs without the GIL
    std::vector<CountsView> views;
    for (nb::handle part : parts) {
        nb::tuple t = nb::cast<nb::tuple>(part);
        if (t.size() != 3) throw nb::value_error("each part is (offsets, data, counts)");
        views.push_back(view_of(nb::cast<Offsets>(t[0]), nb::cast<Bytes>(t[1]), nb::cast<Counts>(t[2])));
        keep.push_back(nb::borrow(part));
    }
    CountsColumns out;
    {
        nb::gil_scoped_release release;
        out = merge_sorted(views);
    }
    return sorted_table(std::move(out));
}

class PyChunkTable {
  public:
    void add(const Offsets& offsets, const Bytes& data, const Counts& counts, uint32_t shard, uint32_t num_shards,
             int64_t min_count) {
        if (num_shards == 0 || shard >= num_shards) throw nb::value_error("shard must be in 0 .. num_shards - 1");
        CountsView v = view_of(offsets, data, counts);
        nb::gil_scoped_release release;
        table_.add(v.offsets, v.data, v.counts, v.n, shard, num_shards, min_count);
    }
    void keep_top(uint64_t max_chunks) {
        nb::gil_scoped_release release;
        table_.keep_top(max_chunks);
    }
    nb::dict tallies() const {
        nb::dict d;
        d["rows"] = table_.rows;
        d["occurrences"] = as_u128(table_.occurrences);
        d["low_rows"] = table_.low_rows;
        d["low_occurrences"] = as_u128(table_.low_occurrences);
        d["over_rows"] = table_.over_rows;
        d["over_occurrences"] = as_u128(table_.over_occurrences);
        return d;
    }
    ChunkTable table_;
};

nb::tuple train_table(PyChunkTable& table, uint64_t budget, int64_t min_count, int tie_break,
                      const std::vector<uint32_t>& hf_rank, nb::object progress) {
    Words w;
    {
        nb::gil_scoped_release release;
        w = table.table_.take_words(budget);
    }
    return run_merge_loop(std::move(w), {}, budget, min_count, tie_break, hf_rank, progress);
}

}  // namespace

template <class T>
static nb::object vector_array(std::vector<T>&& v) {
    auto* owned = new std::vector<T>(std::move(v));
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(owned->data(), {owned->size()}, owner));
}

// (offsets int32, data uint8, counts int64) NumPy arrays that own the table's buffers (no copy).
nb::tuple sorted_table(CountsColumns&& t) {
    return nb::make_tuple(vector_array(std::move(t.offsets)), vector_array(std::move(t.data)),
                          vector_array(std::move(t.counts)));
}

void bind_counts(nb::module_& m) {
    m.def("merge_sorted_counts", &merge_sorted_counts, nb::arg("parts"));
    m.def("crc32", [](nb::bytes b) { return crc32_of(reinterpret_cast<const uint8_t*>(b.c_str()), b.size()); });
    nb::class_<PyChunkTable>(m, "ChunkTable")
        .def(nb::init<>())
        .def("add", &PyChunkTable::add, nb::arg("offsets"), nb::arg("data"), nb::arg("counts"), nb::arg("shard"),
             nb::arg("num_shards"), nb::arg("min_count"))
        .def("keep_top", &PyChunkTable::keep_top, nb::arg("max_chunks"))
        .def("reserve", [](PyChunkTable& t, uint64_t rows, uint64_t bytes) { t.table_.reserve(rows, bytes); },
             nb::arg("rows"), nb::arg("data_bytes"))
        .def("__len__", [](const PyChunkTable& t) { return t.table_.size(); })
        .def("min_count_kept", [](const PyChunkTable& t) { return t.table_.min_count_kept(); })
        .def("count_equal", [](const PyChunkTable& t, int64_t v) { return t.table_.count_equal(v); })
        .def("train_sizes", [](const PyChunkTable& t) { return t.table_.train_sizes(); })
        .def("tallies", &PyChunkTable::tallies);
    m.def("train_table", &train_table, nb::arg("table"), nb::arg("budget"), nb::arg("min_count"),
          nb::arg("tie_break"), nb::arg("hf_rank"), nb::arg("progress").none());
}
