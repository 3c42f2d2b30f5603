// Helpers shared by the binding files of the native core (encoder_bindings.cpp, counter_bindings.cpp, ...) and the
// binders that module.cpp's NB_MODULE calls, one per file.
#pragma once

#include <nanobind/nanobind.h>

#include <algorithm>
#include <string>
#include <vector>

#include "batch.h"
#include "pretok.h"

namespace bpe_bindings {

namespace nb = nanobind;
using bpe::Pretok;
using bpe::Source;

// A hand-written pre-tokenizer by name ("cl100k", ...), or kNone for None (the texts are pieces already).
inline Pretok parse_kind(nb::handle name) {
    if (name.is_none()) return Pretok::kNone;
    if (!PyUnicode_Check(name.ptr())) throw nb::type_error("kind must be a pre-tokenizer name (str) or None");
    const char* text = PyUnicode_AsUTF8(name.ptr());
    if (!text) throw nb::python_error();
    Pretok kind = bpe::pretok_from_name(text);
    if (kind == Pretok::kNone)
        throw nb::value_error((std::string("no hand-written pre-tokenizer is named '") + text + "'").c_str());
    return kind;
}

// The least text (code units) worth one more thread (spawning one costs about 30 us, encoding 64 K units about 1 ms).
constexpr size_t kUnitsPerThread = size_t(1) << 16;

inline size_t units_of(const std::vector<Source>& sources, size_t begin, size_t end) {
    size_t n = 0;
    for (size_t i = begin; i < end; ++i) n += sources[i].length;
    return n;
}

inline size_t threads_for(size_t wanted, size_t docs, size_t units) {
    if (wanted < 1) throw nb::value_error("num_threads must be at least 1");
    return std::min({wanted, docs, std::max<size_t>(1, units / kUnitsPerThread)});
}

inline PyObject* sequence_tuple(nb::handle seq, const char* what) {
    PyObject* tuple = PySequence_Tuple(seq.ptr());
    if (!tuple) {
        PyErr_Clear();
        throw nb::type_error((std::string(what) + " must be a sequence, got " + bpe::type_name(seq.ptr())).c_str());
    }
    return tuple;
}

}  // namespace bpe_bindings

// One binder per file, called by NB_MODULE (module.cpp).
void bind_encoder(nanobind::module_& m);  // encoder_bindings.cpp
void bind_counter(nanobind::module_& m);  // counter_bindings.cpp
void bind_decoder(nanobind::module_& m);  // decoder_bindings.cpp
void bind_trainer(nanobind::module_& m);  // trainer_bindings.cpp
void bind_pretok(nanobind::module_& m);   // pretok_bindings.cpp
void bind_counts(nanobind::module_& m);   // counts_bindings.cpp
void bind_superword(nanobind::module_& m);  // superword_bindings.cpp
void bind_spm(nanobind::module_& m);        // spm_bindings.cpp
