// Python bindings of the native core (nanobind): bpe_core._native._core. Glue only: each part binds itself in its
// own file (bindings.h lists them). Python objects are read and built there with the GIL held; the loops in
// encoder.cpp, trainer.cpp, counts.cpp and pretok.cpp run with the GIL released.
#include <nanobind/nanobind.h>

#include "bindings.h"

namespace nb = nanobind;

NB_MODULE(_core, m) {
    m.doc() = "beam-bpe native core: BPE encoder, decoder and merge loop (see bpe_core/native.py)";
#ifndef BPE_SANITIZE
    // A run that fails exits with tokenizers still referenced by tracebacks and per-process caches; nanobind then
    // printed "leaked N instances ... See https://nanobind.readthedocs.io/en/latest/refleaks.html" (no newline)
    // onto the CLI's one-line failure. The sanitizer build keeps the report, where leaks are looked for.
    nb::set_leak_warnings(false);
#endif
    bind_encoder(m);
    bind_counter(m);
    bind_decoder(m);
    bind_trainer(m);
    bind_pretok(m);
    bind_counts(m);
    bind_superword(m);
    bind_spm(m);
}
