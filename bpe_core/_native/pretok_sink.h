// The interface through which an encoder fuses its keying into a splitter's flatten (issue 31; GigaToken's "phase
// B"): the block walkers of pretok_blocks.cpp (and the family scanners that follow it) find a block's piece starts as
// a 64-bit mask, and today flatten it into ends[] that the encoder reads again (Encoder::encode_pieces_to). A sink
// takes each block's pieces where they are found, while the block's bytes are still in registers and L1.
//
// Not used yet: this header fixes the contract so that the encoder side (encoder.*, piece_table.h) and the splitter
// side can be written apart. A walker templated on a Sink calls, for each block it splits:
//
//     sink.block(text, n, start, starts, count)
//
// with `start` the offset of the block's first byte (a piece starts there), `starts` the certain piece starts of
// the block after `start` as a mask (bit j: a piece starts at text[start + j], j in 1..63, the last set bit is where
// the next block starts), and `count` = popcount(starts). Bytes text[start, start + 64) are readable, and
// text[start + 64, start + 80) too when start + 80 <= n (PieceKey's piece_key_wide reads 16 bytes from a piece's
// start). Pieces that come from the scalar fallback (non-ASCII zones, the end of a text) go through
//
//     sink.pieces(text, n, start, ends, count)
//
// as the end offsets that pretok_split_some writes. A sink returns false to stop the walk (a byte without a token,
// Ctrl-C, a full output buffer); the walker then returns the position it had reached, which starts a piece.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bpe {

// The sink that gives today's behaviour: every piece end into an array, as pretok_blocks_split_some does.
struct EndsSink {
    size_t* ends;
    size_t max;
    size_t count = 0;

    bool block(const uint8_t*, size_t, size_t start, uint64_t starts, unsigned n_starts) {
        if (max - count < n_starts) return false;
        while (starts) {
            ends[count++] = start + unsigned(__builtin_ctzll(starts));
            starts &= starts - 1;
        }
        return true;
    }
    bool pieces(const uint8_t*, size_t, size_t, const size_t* piece_ends, size_t n_pieces) {
        if (max - count < n_pieces) return false;
        for (size_t k = 0; k < n_pieces; ++k) ends[count++] = piece_ends[k];
        return true;
    }
};

}  // namespace bpe
