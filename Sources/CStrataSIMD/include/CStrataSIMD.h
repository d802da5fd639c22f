// The AVX2 kernels, in one place: the resampler's, and the colour merge of a progressive JPEG
// decoded on two threads. Swift has no per-function target attributes, so code for
// instructions beyond the x86-64 baseline (SSE2) lives here, compiled with
// `__attribute__((target(...)))` and chosen at run time (`strata_simd_avx2`). Without AVX2 (or
// off x86-64) the resampler's Swift kernels in Sources/Strata/Pixels, and the merge's scalar
// loop, run instead. The pointers come from the Swift type that owns the memory (Resampler,
// ProgressiveJPEGSplit); nothing here allocates or keeps them.
#ifndef C_STRATA_SIMD_H
#define C_STRATA_SIMD_H

#include <stddef.h>
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

/// libjpeg's YCbCr → RGB conversion (its integer tables, the same bytes as its own BGRA
/// output) of `rows` rows of `width` pixels: Y from `luma` (1 byte a pixel), Cb and Cr from
/// `ycc` (Y, Cb, Cr, 3 bytes a pixel; its Y is ignored), into premultiplied BGRA (alpha 255) at
/// `out`. AVX2 where `strata_simd_avx2` says so, 8 pixels a step; scalar elsewhere and off x86-64.
void strata_jpeg_merge_bgra(
    const uint8_t *luma, size_t luma_stride, const uint8_t *ycc, size_t ycc_stride, uint8_t *out, size_t out_stride,
    uint32_t width, uint32_t rows);

/// One row of a pyramid level from two rows of the level above (`above0`, `above1`, each
/// `width` 4-byte pixels; pass the same row twice for a lone last row): output pixel `x` is the
/// rounded mean of pixels 2x and 2x+1 of both rows, channel by channel (a 2×2 box; the last
/// output of an odd width averages the one pixel left, of each row). Writes `(width + 1) / 2`
/// pixels to `out`. Plain C that the compiler vectorises at the baseline (SSE2).
void strata_reduce_2x2(const uint8_t *above0, const uint8_t *above1, size_t width, uint8_t *out);

#endif
