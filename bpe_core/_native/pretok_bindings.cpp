// Python bindings of the hand-written pre-tokenizers (called from module.cpp's NB_MODULE).
#include <nanobind/nanobind.h>

#include "pretok.h"

namespace nb = nanobind;

void bind_pretok(nb::module_& m);

void bind_pretok(nb::module_& m) {
    (void)m;  // split / pretok_names bindings: see the pre-tokenizer work
}
