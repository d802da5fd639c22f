#include "CStrataSIMD.h"

void strata_reduce_2x2(const uint8_t *above0, const uint8_t *above1, size_t width, uint8_t *out) {
    size_t pairs = width / 2;
    // Byte by byte over 8-byte pixel pairs: four sums of 16 bits, rounded; clang turns the
    // loop into packed 16-bit adds and shifts.
    for (size_t i = 0; i < pairs; i++) {
        const uint8_t *a = above0 + 8 * i, *b = above1 + 8 * i;
        uint8_t *o = out + 4 * i;
        for (int c = 0; c < 4; c++) {
            unsigned sum = (unsigned)a[c] + a[c + 4] + b[c] + b[c + 4] + 2;
            o[c] = (uint8_t)(sum >> 2);
        }
    }
    if (width & 1) {
        const uint8_t *a = above0 + 8 * pairs, *b = above1 + 8 * pairs;
        uint8_t *o = out + 4 * pairs;
        for (int c = 0; c < 4; c++) o[c] = (uint8_t)(((unsigned)a[c] + b[c] + 1) >> 1);
    }
}
