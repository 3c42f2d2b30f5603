"""The C++ core (``_core``, built from the sources in this folder); use it through :mod:`bpe_core.native`."""
