"""``python -m pipeline.cli``: the same as the ``beam-bpe`` command."""

import sys

from pipeline.cli.app import main

sys.exit(main())
