// The colour merge of a progressive JPEG split over two threads (see CStrataSIMD.h).
#include "CStrataSIMD.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// libjpeg's YCbCr → RGB (jdcolor.c, SCALEBITS 16): R = Y + ⌊(91881·Cr' + 2¹⁵) / 2¹⁶⌋,
// G = Y + ⌊(−22554·Cb' − 46802·Cr' + 2¹⁵) / 2¹⁶⌋, B = Y + ⌊(116130·Cb' + 2¹⁵) / 2¹⁶⌋ with
// Cb' = Cb − 128, Cr' = Cr − 128, each clamped to 0…255. libjpeg-turbo's SIMD converters give
// the same bytes as these tables (tested against its own BGRA decode).

static inline uint8_t clamp255(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

static void merge_scalar(const uint8_t *y, const uint8_t *ycc, uint8_t *out, uint32_t from, uint32_t width) {
    for (uint32_t x = from; x < width; x++) {
        int luma = y[x], cb = ycc[3 * x + 1] - 128, cr = ycc[3 * x + 2] - 128;
        out[4 * x + 0] = clamp255(luma + ((116130 * cb + 32768) >> 16));
        out[4 * x + 1] = clamp255(luma + ((-22554 * cb - 46802 * cr + 32768) >> 16));
        out[4 * x + 2] = clamp255(luma + ((91881 * cr + 32768) >> 16));
        out[4 * x + 3] = 255;
    }
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint32_t merge_avx2(
    const uint8_t *y, const uint8_t *ycc, uint8_t *out, uint32_t width) {
    // Cb and Cr of 8 pixels (24 bytes: 16 in `lo`, 8 in `hi`) gathered into 8 bytes each.
    const __m128i cb_lo = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i cb_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i cr_lo = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i cr_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i center = _mm256_set1_epi32(128), half = _mm256_set1_epi32(32768);
    const __m256i k_b = _mm256_set1_epi32(116130), k_gb = _mm256_set1_epi32(-22554);
    const __m256i k_gr = _mm256_set1_epi32(-46802), k_r = _mm256_set1_epi32(91881);
    const __m256i zero = _mm256_setzero_si256(), top = _mm256_set1_epi32(255);
    const __m256i alpha = _mm256_set1_epi32((int)0xFF000000u);
    uint32_t x = 0;
    for (; x + 8 <= width; x += 8) {
        __m128i lo = _mm_loadu_si128((const __m128i *)(ycc + 3 * x));
        __m128i hi = _mm_loadl_epi64((const __m128i *)(ycc + 3 * x + 16));
        __m128i cb8 = _mm_or_si128(_mm_shuffle_epi8(lo, cb_lo), _mm_shuffle_epi8(hi, cb_hi));
        __m128i cr8 = _mm_or_si128(_mm_shuffle_epi8(lo, cr_lo), _mm_shuffle_epi8(hi, cr_hi));
        __m256i luma = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(y + x)));
        __m256i cb = _mm256_sub_epi32(_mm256_cvtepu8_epi32(cb8), center);
        __m256i cr = _mm256_sub_epi32(_mm256_cvtepu8_epi32(cr8), center);
        __m256i b = _mm256_add_epi32(luma, _mm256_srai_epi32(_mm256_add_epi32(_mm256_mullo_epi32(cb, k_b), half), 16));
        __m256i g = _mm256_add_epi32(
            luma, _mm256_srai_epi32(
                      _mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(cb, k_gb), _mm256_mullo_epi32(cr, k_gr)), half),
                      16));
        __m256i r = _mm256_add_epi32(luma, _mm256_srai_epi32(_mm256_add_epi32(_mm256_mullo_epi32(cr, k_r), half), 16));
        b = _mm256_min_epi32(_mm256_max_epi32(b, zero), top);
        g = _mm256_min_epi32(_mm256_max_epi32(g, zero), top);
        r = _mm256_min_epi32(_mm256_max_epi32(r, zero), top);
        __m256i pixels = _mm256_or_si256(
            _mm256_or_si256(b, _mm256_slli_epi32(g, 8)), _mm256_or_si256(_mm256_slli_epi32(r, 16), alpha));
        _mm256_storeu_si256((__m256i *)(out + 4 * x), pixels);
    }
    return x;
}

#endif

void strata_jpeg_merge_bgra(
    const uint8_t *luma, size_t luma_stride, const uint8_t *ycc, size_t ycc_stride, uint8_t *out, size_t out_stride,
    uint32_t width, uint32_t rows) {
    int avx2 = strata_simd_avx2();
    for (uint32_t row = 0; row < rows; row++) {
        const uint8_t *y = luma + (size_t)row * luma_stride, *c = ycc + (size_t)row * ycc_stride;
        uint8_t *o = out + (size_t)row * out_stride;
        uint32_t done = 0;
#if defined(__x86_64__)
        if (avx2) done = merge_avx2(y, c, o, width);
#else
        (void)avx2;
#endif
        merge_scalar(y, c, o, done, width);
    }
}
