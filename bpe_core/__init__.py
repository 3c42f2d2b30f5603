"""bpe_core: exact byte-level BPE (pre-tokenize, train, encode, decode, stream). Never imports Apache Beam.

>>> import bpe_core
>>> tok = bpe_core.train(bpe_core.count_chunks(["hello world"] * 3, "cl100k"), 262)
>>> tok.decode(tok.encode("hello world"))
'hello world'
"""

from bpe_core._versions import BEAM_BPE_VERSION as __version__
from bpe_core.encode.flat import InvalidTextError
from bpe_core.encode.stream import StreamingDecoder
from bpe_core.errors import TokenizerFileError
from bpe_core.model.vocab import VocabularyError
from bpe_core.pretokenize.presets import preset_names
from bpe_core.pretokenize.pretokenizer import PreTokenizer
from bpe_core.tokenizer import Tokenizer
from bpe_core.train.trainer import TIE_BREAKS, ChunkCounts, count_chunks, train, train_superword

__all__ = [
    "TIE_BREAKS",
    "ChunkCounts",
    "InvalidTextError",
    "PreTokenizer",
    "StreamingDecoder",
    "Tokenizer",
    "TokenizerFileError",
    "VocabularyError",
    "__version__",
    "count_chunks",
    "preset_names",
    "train",
    "train_superword",
]
