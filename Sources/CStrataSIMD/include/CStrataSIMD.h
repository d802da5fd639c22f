// The resampler's AVX2 kernels, in one place: Swift has no per-function target attributes,
// so code for instructions beyond the x86-64 baseline (SSE2) lives here, compiled with
// `__attribute__((target("avx2,fma")))` and chosen at run time (`strata_simd_avx2`). Without
// AVX2 (or off x86-64) the Swift kernels in Sources/Strata/Pixels run instead. The pointers
// come from the Resampler that owns the memory; nothing here allocates or keeps them.
#ifndef C_STRATA_SIMD_H
#define C_STRATA_SIMD_H

#include <stdint.h>

/// 1 when the CPU has AVX2 and FMA (the kernels below may be called), else 0.
int strata_simd_avx2(void);

/// Expands one row of `pixels` 4-byte pixels into channel-interleaved 16-bit pixel pairs, 8
/// `int16_t` per element: `pairs[k]` = pixels 2k and 2k+1 (`b₀ b₁ g₀ g₁ r₀ r₁ a₀ a₁`); a
/// pair's missing second pixel reads as 0. Writes `(pixels + 1) / 2 + 1` elements (the last one
/// zero), so that a 32-byte read at any pair the filter uses stays inside.
void strata_pairs_avx2(const uint8_t *row, long pixels, int16_t *pairs);

/// Horizontal pass for 4-channel pixels from `strata_pairs_avx2`'s pairs: output `x` sums
/// `counts[x]` taps from pixel `starts[x] - span`, which must be even (the weights are aligned
/// to even pixels, a leading zero weight where an output starts at an odd one), with the 16-bit
/// weights at `coefficients + x * pairsPerOutput * 8` (pairs of taps, each repeated for the 4
/// channels), two pairs of taps per `vpmaddwd`, and stores 4 floats (`sum * unit`) at `out + 4x`.
void strata_filter_row4_avx2(
    const int16_t *pairs, long span, const long *starts, const long *counts, const int16_t *coefficients,
    long pairsPerOutput, float unit, long width, float *out);

/// `strata_filter_row4_avx2` for two source rows at once (pairs A and B, into `outA` and
/// `outB`): the same sums, with each coefficient load and each output's bookkeeping shared by
/// both rows.
void strata_filter_rows4x2_avx2(
    const int16_t *pairsA, const int16_t *pairsB, long span, const long *starts, const long *counts,
    const int16_t *coefficients, long pairsPerOutput, float unit, long width, float *outA, float *outB);

/// Vertical pass: `out[j] = Σₖ weights[k] · rows[k][j]` for `j < values`, `k < count`, eight
/// floats per fused multiply-add, all the taps of a 32-value block summed in registers.
void strata_blend_rows_avx2(
    const float *const *rows, const float *weights, long count, long values, float *out);

/// Vertical pass and rounding for 4-channel rows in one: output pixel `x < width` is
/// `Σₖ weights[k] · rows[k][4x…4x+3]`, clamped to 0…255 and rounded to nearest (ties to even),
/// then either given an opaque fourth byte (`opaque` ≠ 0) or, premultiplied, its colour clamped
/// to its alpha; the 4 bytes go to `out + 4x`. Eight pixels per step, from registers to bytes
/// without a float row in between.
void strata_blend_store4_avx2(
    const float *const *rows, const float *weights, long count, long width, int opaque, uint8_t *out);

#endif
