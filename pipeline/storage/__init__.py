"""Storage: what every output shares, with no stage and no command in it.

paths.py         local paths and URLs, told apart and spelt one way
files.py         fsspec file helpers, complete-or-absent writes, output guards
identity.py      an input file's identity: size and version
lease.py         one job per output: the lease in --out
manifest.py      manifest.json and COMPLETED, the last two files of every output
"""
