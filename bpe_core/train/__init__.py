"""Training, the top floor: chunk counting and the merge loop (``trainer``), counts as sorted columns
(``sorted_counts``), phase 1's merge loop on the native core (``native_loop``), and the pre-flight's growth model
(``growth``). It may import everything below, the
``Tokenizer`` included (training returns one)."""
