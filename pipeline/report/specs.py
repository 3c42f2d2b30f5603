"""The tokenizers of a report as the launcher names them and the workers load them: no Beam here, so that a
training run can check its ``--compare`` files before it imports a pipeline (``train --from-counts`` never imports
Beam)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenizerSpec:
    """A tokenizer of the report, as workers find it: a label, a file and its pre-tokenizer (rank-only files)."""

    label: str
    path: str
    pretokenizer: str | None = None

    def load(self):
        from bpe_core import Tokenizer

        return Tokenizer.from_file(self.path, pretokenizer=self.pretokenizer)


def unique_labels(paths: list[str]) -> list[str]:
    """A label per tokenizer file: its name (``cl100k_base.tiktoken``), its folder and name where names repeat."""
    import posixpath

    names = [posixpath.basename(p.rstrip("/")) for p in paths]
    labels = []
    for p, name in zip(paths, names, strict=True):
        label = name if names.count(name) == 1 else posixpath.join(posixpath.basename(posixpath.dirname(p)), name)
        while label in labels:
            label += "'"
        labels.append(label)
    return labels
