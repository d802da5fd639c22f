// AVX2 kernels of the resampler (see CStrataSIMD.h). Every function that uses AVX2 carries the
// target attribute; the rest of the file, and the build, stay at the x86-64 baseline.
#include "CStrataSIMD.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

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
void strata_pairs_avx2(const uint8_t *row, long pixels, int16_t *even, int16_t *odd) {
    // Four pixels (16 bytes) → two elements: bytes reordered to b₀ b₁ g₀ g₁ … b₂ b₃ …, then
    // zero-extended to 16 bits.
    const __m128i order = _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    const long elements = (pixels + 1) / 2 + 1;
    long j = 0;
    for (; j + 4 <= pixels; j += 4) {
        __m128i v = _mm_loadu_si128((const __m128i *)(row + 4 * j));
        _mm256_storeu_si256((__m256i *)(even + 4 * j), _mm256_cvtepu8_epi16(_mm_shuffle_epi8(v, order)));
    }
    for (long k = j / 2; k < elements; k++) pair_scalar(row, pixels, 2 * k, even + 8 * k);
    j = 0;
    for (; j + 5 <= pixels; j += 4) {
        __m128i v = _mm_loadu_si128((const __m128i *)(row + 4 * (j + 1)));
        _mm256_storeu_si256((__m256i *)(odd + 4 * j), _mm256_cvtepu8_epi16(_mm_shuffle_epi8(v, order)));
    }
    for (long k = j / 2; k < elements; k++) pair_scalar(row, pixels, 2 * k + 1, odd + 8 * k);
}

__attribute__((target("avx2,fma")))
void strata_filter_row4_avx2(
    const int16_t *even, const int16_t *odd, long span, const long *starts, const long *counts,
    const int16_t *coefficients, long pairsPerOutput, float unit, long width, float *out) {
    const __m128 scale = _mm_set1_ps(unit);
    const int16_t *c = coefficients;
    for (long x = 0; x < width; x++, c += pairsPerOutput * 8) {
        const long s = starts[x] - span;
        const long m = (counts[x] + 1) >> 1;
        // Pairs starting at pixel s are consecutive elements of one of the two arrays.
        const int16_t *p = (s & 1) ? odd + ((s - 1) >> 1) * 8 : even + (s >> 1) * 8;
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
void strata_blend_rows_avx2(
    const float *const *rows, const float *weights, long count, long values, float *out) {
    long j = 0;
    for (; j + 32 <= values; j += 32) {
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
        _mm256_storeu_ps(out + j, a0);
        _mm256_storeu_ps(out + j + 8, a1);
        _mm256_storeu_ps(out + j + 16, a2);
        _mm256_storeu_ps(out + j + 24, a3);
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

#else

int strata_simd_avx2(void) { return 0; }
void strata_pairs_avx2(const uint8_t *row, long pixels, int16_t *even, int16_t *odd) {
    (void)row; (void)pixels; (void)even; (void)odd;
}
void strata_filter_row4_avx2(
    const int16_t *even, const int16_t *odd, long span, const long *starts, const long *counts,
    const int16_t *coefficients, long pairsPerOutput, float unit, long width, float *out) {
    (void)even; (void)odd; (void)span; (void)starts; (void)counts; (void)coefficients;
    (void)pairsPerOutput; (void)unit; (void)width; (void)out;
}
void strata_blend_rows_avx2(
    const float *const *rows, const float *weights, long count, long values, float *out) {
    (void)rows; (void)weights; (void)count; (void)values; (void)out;
}

#endif
