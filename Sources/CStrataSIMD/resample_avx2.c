// AVX2 kernels of the resampler (see CStrataSIMD.h). Every function that uses AVX2 carries the
// target attribute; the rest of the file, and the build, stay at the x86-64 baseline.
#include "CStrataSIMD.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>

int strata_simd_avx2(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    // OSXSAVE, AVX and FMA, and the OS saving the YMM state (XCR0 bits 1 and 2).
    if (!(c & (1u << 27)) || !(c & (1u << 28)) || !(c & (1u << 12))) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6u) != 6u) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b & (1u << 5)) ? 1 : 0;
}

/// One element by hand: pixels `p` and `p + 1` (0 past the row), channels interleaved.
static inline void pair_scalar(const uint8_t *row, long pixels, long p, int16_t *element) {
    for (int channel = 0; channel < 4; channel++) {
        element[2 * channel] = p < pixels ? row[4 * p + channel] : 0;
        element[2 * channel + 1] = p + 1 < pixels ? row[4 * (p + 1) + channel] : 0;
    }
}

__attribute__((target("avx2,fma")))
void strata_pairs_avx2(const uint8_t *row, long pixels, int16_t *pairs) {
    // Four pixels (16 bytes) → two elements: bytes reordered to b₀ b₁ g₀ g₁ … b₂ b₃ …, then
    // zero-extended to 16 bits.
    const __m128i order = _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    const long elements = (pixels + 1) / 2 + 1;
    long j = 0;
    for (; j + 4 <= pixels; j += 4) {
        __m128i v = _mm_loadu_si128((const __m128i *)(row + 4 * j));
        _mm256_storeu_si256((__m256i *)(pairs + 4 * j), _mm256_cvtepu8_epi16(_mm_shuffle_epi8(v, order)));
    }
    for (long k = j / 2; k < elements; k++) pair_scalar(row, pixels, 2 * k, pairs + 8 * k);
}

__attribute__((target("avx2,fma")))
void strata_filter_row4_avx2(
    const int16_t *pairs, long span, const long *starts, const long *counts, const int16_t *coefficients,
    long pairsPerOutput, float unit, long width, float *out) {
    const __m128 scale = _mm_set1_ps(unit);
    const int16_t *c = coefficients;
    for (long x = 0; x < width; x++, c += pairsPerOutput * 8) {
        const long s = starts[x] - span;
        const long m = (counts[x] + 1) >> 1;
        // s is even: the pairs from pixel s on are consecutive elements.
        const int16_t *p = pairs + (s >> 1) * 8;
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
        long k = 0;
        for (; k + 4 <= m; k += 4) {
            acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(
                _mm256_loadu_si256((const __m256i *)(p + 8 * k)), _mm256_loadu_si256((const __m256i *)(c + 8 * k))));
            acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(
                _mm256_loadu_si256((const __m256i *)(p + 8 * k + 16)), _mm256_loadu_si256((const __m256i *)(c + 8 * k + 16))));
        }
        if (k + 2 <= m) {
            acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(
                _mm256_loadu_si256((const __m256i *)(p + 8 * k)), _mm256_loadu_si256((const __m256i *)(c + 8 * k))));
            k += 2;
        }
        acc0 = _mm256_add_epi32(acc0, acc1);
        __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(acc0), _mm256_extracti128_si256(acc0, 1));
        if (k < m) {
            sum = _mm_add_epi32(sum, _mm_madd_epi16(
                _mm_loadu_si128((const __m128i *)(p + 8 * k)), _mm_loadu_si128((const __m128i *)(c + 8 * k))));
        }
        _mm_storeu_ps(out + 4 * x, _mm_mul_ps(_mm_cvtepi32_ps(sum), scale));
    }
}

__attribute__((target("avx2,fma")))
void strata_filter_rows4x2_avx2(
    const int16_t *pairsA, const int16_t *pairsB, long span, const long *starts, const long *counts,
    const int16_t *coefficients, long pairsPerOutput, float unit, long width, float *outA, float *outB) {
    const __m256 scale = _mm256_set1_ps(unit);
    const int16_t *c = coefficients;
    for (long x = 0; x < width; x++, c += pairsPerOutput * 8) {
        const long s = starts[x] - span;
        const long m = (counts[x] + 1) >> 1;
        const int16_t *p = pairsA + (s >> 1) * 8, *q = pairsB + (s >> 1) * 8;
        // Each coefficient load serves both rows.
        __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
        __m256i b0 = _mm256_setzero_si256(), b1 = _mm256_setzero_si256();
        long k = 0;
        for (; k + 4 <= m; k += 4) {
            const __m256i w0 = _mm256_loadu_si256((const __m256i *)(c + 8 * k));
            const __m256i w1 = _mm256_loadu_si256((const __m256i *)(c + 8 * k + 16));
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(p + 8 * k)), w0));
            b0 = _mm256_add_epi32(b0, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(q + 8 * k)), w0));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(p + 8 * k + 16)), w1));
            b1 = _mm256_add_epi32(b1, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(q + 8 * k + 16)), w1));
        }
        if (k + 2 <= m) {
            const __m256i w0 = _mm256_loadu_si256((const __m256i *)(c + 8 * k));
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(p + 8 * k)), w0));
            b0 = _mm256_add_epi32(b0, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(q + 8 * k)), w0));
            k += 2;
        }
        a0 = _mm256_add_epi32(a0, a1);
        b0 = _mm256_add_epi32(b0, b1);
        // Row A's two halves in the low lane, row B's in the high lane: one add sums both.
        __m256i sums = _mm256_add_epi32(
            _mm256_permute2x128_si256(a0, b0, 0x20), _mm256_permute2x128_si256(a0, b0, 0x31));
        if (k < m) {
            const __m128i w = _mm_loadu_si128((const __m128i *)(c + 8 * k));
            sums = _mm256_add_epi32(sums, _mm256_set_m128i(
                _mm_madd_epi16(_mm_loadu_si128((const __m128i *)(q + 8 * k)), w),
                _mm_madd_epi16(_mm_loadu_si128((const __m128i *)(p + 8 * k)), w)));
        }
        const __m256 values = _mm256_mul_ps(_mm256_cvtepi32_ps(sums), scale);
        _mm_storeu_ps(outA + 4 * x, _mm256_castps256_ps128(values));
        _mm_storeu_ps(outB + 4 * x, _mm256_extractf128_ps(values, 1));
    }
}

/// Values `j … j + 31` of `Σₖ weights[k] · rows[k]`, all taps summed in four registers.
__attribute__((target("avx2,fma"), always_inline))
static inline void blend32(const float *const *rows, const float *weights, long count, long j, __m256 sum[4]) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    for (long k = 0; k < count; k++) {
        const __m256 w = _mm256_set1_ps(weights[k]);
        const float *r = rows[k] + j;
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r), w, a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 8), w, a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 16), w, a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 24), w, a3);
    }
    sum[0] = a0;
    sum[1] = a1;
    sum[2] = a2;
    sum[3] = a3;
}

__attribute__((target("avx2,fma")))
void strata_blend_rows_avx2(
    const float *const *rows, const float *weights, long count, long values, float *out) {
    long j = 0;
    for (; j + 32 <= values; j += 32) {
        __m256 sum[4];
        blend32(rows, weights, count, j, sum);
        for (int i = 0; i < 4; i++) _mm256_storeu_ps(out + j + 8 * i, sum[i]);
    }
    for (; j + 8 <= values; j += 8) {
        __m256 a = _mm256_setzero_ps();
        for (long k = 0; k < count; k++) a = _mm256_fmadd_ps(_mm256_loadu_ps(rows[k] + j), _mm256_set1_ps(weights[k]), a);
        _mm256_storeu_ps(out + j, a);
    }
    for (; j < values; j++) {
        float a = 0;
        for (long k = 0; k < count; k++) a += rows[k][j] * weights[k];
        out[j] = a;
    }
}


/// One filtered sample to a byte: clamped to 0…255, rounded to nearest (ties to even, the
/// default MXCSR mode), as the Swift kernels' `byte` does.
static inline uint32_t byte_of(float v) {
    v = v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v);
    return (uint32_t)_mm_cvtss_si32(_mm_set_ss(v));
}

__attribute__((target("avx2,fma")))
void strata_blend_store4_avx2(
    const float *const *rows, const float *weights, long count, long width, int opaque, uint8_t *out) {
    const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.0f);
    // packs/packus work within 128-bit lanes: the eight pixels come out as 0 2 4 6 1 3 5 7.
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i alphas = _mm256_setr_epi8(
        3, 3, 3, 3, 7, 7, 7, 7, 11, 11, 11, 11, 15, 15, 15, 15,
        3, 3, 3, 3, 7, 7, 7, 7, 11, 11, 11, 11, 15, 15, 15, 15);
    const __m256i opaqueAlpha = _mm256_set1_epi32((int)0xFF000000u);
    long x = 0;
    for (; x + 8 <= width; x += 8) {
        const long j = 4 * x;
        __m256 sum[4];
        blend32(rows, weights, count, j, sum);
        __m256i i[4];
        for (int n = 0; n < 4; n++) i[n] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(sum[n], zero), top));
        __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
        bytes = _mm256_permutevar8x32_epi32(bytes, order);
        // Premultiplied colour is clamped to its alpha (ringing can push it over).
        bytes = opaque ? _mm256_or_si256(bytes, opaqueAlpha)
                       : _mm256_min_epu8(bytes, _mm256_shuffle_epi8(bytes, alphas));
        _mm256_storeu_si256((__m256i *)(out + j), bytes);
    }
    for (; x < width; x++) {
        uint32_t v[4];
        for (int c = 0; c < 4; c++) {
            float a = 0;
            for (long k = 0; k < count; k++) a = fmaf(rows[k][4 * x + c], weights[k], a);
            v[c] = byte_of(a);
        }
        if (opaque) {
            v[3] = 255;
        } else {
            for (int c = 0; c < 3; c++) v[c] = v[c] < v[3] ? v[c] : v[3];
        }
        for (int c = 0; c < 4; c++) out[4 * x + c] = (uint8_t)v[c];
    }
}

#else

int strata_simd_avx2(void) { return 0; }
void strata_pairs_avx2(const uint8_t *row, long pixels, int16_t *pairs) {
    (void)row; (void)pixels; (void)pairs;
}
void strata_filter_row4_avx2(
    const int16_t *pairs, long span, const long *starts, const long *counts, const int16_t *coefficients,
    long pairsPerOutput, float unit, long width, float *out) {
    (void)pairs; (void)span; (void)starts; (void)counts; (void)coefficients;
    (void)pairsPerOutput; (void)unit; (void)width; (void)out;
}
void strata_filter_rows4x2_avx2(
    const int16_t *pairsA, const int16_t *pairsB, long span, const long *starts, const long *counts,
    const int16_t *coefficients, long pairsPerOutput, float unit, long width, float *outA, float *outB) {
    (void)pairsA; (void)pairsB; (void)span; (void)starts; (void)counts; (void)coefficients;
    (void)pairsPerOutput; (void)unit; (void)width; (void)outA; (void)outB;
}
void strata_blend_rows_avx2(
    const float *const *rows, const float *weights, long count, long values, float *out) {
    (void)rows; (void)weights; (void)count; (void)values; (void)out;
}
void strata_blend_store4_avx2(
    const float *const *rows, const float *weights, long count, long width, int opaque, uint8_t *out) {
    (void)rows; (void)weights; (void)count; (void)width; (void)opaque; (void)out;
}

#endif
