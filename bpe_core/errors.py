"""Exceptions raised by bpe_core."""

from __future__ import annotations


class TokenizerFileError(ValueError):
    """A tokenizer file is malformed: the message names the file, the line (where there is one) and the problem."""

    def __init__(self, path: object, problem: str, *, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")
