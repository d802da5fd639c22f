#include "CStrataJP2.h"

#include <openjpeg.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct strata_jp2 {
    opj_codec_t *codec;
    opj_stream_t *stream;
    opj_image_t *image;
    const uint8_t *bytes;
    size_t length;
    size_t position;
    uint32_t threads;
    char message[256];
};

// MARK: - Bytes in memory as an OpenJPEG stream

static OPJ_SIZE_T read_bytes(void *buffer, OPJ_SIZE_T count, void *user) {
    struct strata_jp2 *file = user;
    size_t left = file->length - file->position;
    if (left == 0) return (OPJ_SIZE_T)-1;
    size_t n = count < left ? count : left;
    memcpy(buffer, file->bytes + file->position, n);
    file->position += n;
    return n;
}

static OPJ_OFF_T skip_bytes(OPJ_OFF_T count, void *user) {
    struct strata_jp2 *file = user;
    if (count < 0) {
        size_t back = (size_t)(-count);
        if (back > file->position) return -1;
        file->position -= back;
        return count;
    }
    size_t left = file->length - file->position;
    size_t n = (size_t)count < left ? (size_t)count : left;
    file->position += n;
    return (OPJ_OFF_T)n;
}

static OPJ_BOOL seek_bytes(OPJ_OFF_T offset, void *user) {
    struct strata_jp2 *file = user;
    if (offset < 0 || (size_t)offset > file->length) return OPJ_FALSE;
    file->position = (size_t)offset;
    return OPJ_TRUE;
}

// MARK: - Messages

static void keep_error(const char *text, void *user) {
    struct strata_jp2 *file = user;
    if (file->message[0] != 0) return;  // the first error says what went wrong
    snprintf(file->message, sizeof file->message, "%s", text);
    size_t n = strlen(file->message);
    while (n > 0 && (file->message[n - 1] == '\n' || file->message[n - 1] == ' ')) file->message[--n] = 0;
}

static void ignore(const char *text, void *user) {
    (void)text;
    (void)user;
}

static void fail(struct strata_jp2 *file, const char *fallback, char *error, size_t capacity) {
    if (capacity == 0) return;
    snprintf(error, capacity, "%s", file && file->message[0] ? file->message : fallback);
}

// MARK: - Open, header

strata_jp2 *strata_jp2_open(const void *bytes, size_t length, int codestream, uint32_t threads, char *error,
                            size_t error_capacity) {
    struct strata_jp2 *file = calloc(1, sizeof *file);
    if (!file) {
        fail(NULL, "out of memory", error, error_capacity);
        return NULL;
    }
    file->bytes = bytes;
    file->length = length;
    file->codec = opj_create_decompress(codestream ? OPJ_CODEC_J2K : OPJ_CODEC_JP2);
    file->stream = opj_stream_create(64 * 1024, OPJ_TRUE);
    if (!file->codec || !file->stream) {
        fail(NULL, "OpenJPEG could not make a decoder", error, error_capacity);
        strata_jp2_close(file);
        return NULL;
    }
    opj_set_error_handler(file->codec, keep_error, file);
    opj_set_warning_handler(file->codec, ignore, file);
    opj_set_info_handler(file->codec, ignore, file);
    opj_stream_set_user_data(file->stream, file, NULL);
    opj_stream_set_user_data_length(file->stream, length);
    opj_stream_set_read_function(file->stream, read_bytes);
    opj_stream_set_skip_function(file->stream, skip_bytes);
    opj_stream_set_seek_function(file->stream, seek_bytes);
    opj_dparameters_t parameters;
    opj_set_default_decoder_parameters(&parameters);
    if (!opj_setup_decoder(file->codec, &parameters)) {
        fail(file, "OpenJPEG could not set up a decoder", error, error_capacity);
        strata_jp2_close(file);
        return NULL;
    }
    // The thread count goes in between the setup and the header (OpenJPEG's rule).
    file->threads = 1;
    if (threads > 1 && opj_has_thread_support() && opj_codec_set_threads(file->codec, (int)threads)) file->threads = threads;
    if (!opj_decoder_set_strict_mode(file->codec, OPJ_TRUE) || !opj_read_header(file->stream, file->codec, &file->image)
        || !file->image) {
        fail(file, "not a JPEG 2000 image OpenJPEG can read", error, error_capacity);
        strata_jp2_close(file);
        return NULL;
    }
    return file;
}

/// Whether component `i` is alpha: a `cdef` box says so, or, without one, it is the last of
/// 2 (gray and alpha) or of 4 in a colour space that is not CMYK.
static int is_alpha(const opj_image_t *image, uint32_t i) {
    for (uint32_t c = 0; c < image->numcomps; c++) {
        if (image->comps[c].alpha) return image->comps[i].alpha != 0;
    }
    if (image->numcomps == 2 && i == 1) return 1;
    return image->numcomps == 4 && i == 3 && image->color_space != OPJ_CLRSPC_CMYK;
}

/// Whether three colour components are luma and chroma: sYCC said, or chroma subsampled.
static int is_ycc(const opj_image_t *image) {
    if (image->numcomps < 3) return 0;
    if (image->color_space == OPJ_CLRSPC_SYCC) return 1;
    if (image->color_space == OPJ_CLRSPC_UNKNOWN || image->color_space == OPJ_CLRSPC_UNSPECIFIED) {
        return image->comps[1].dx > 1 || image->comps[1].dy > 1 || image->comps[2].dx > 1 || image->comps[2].dy > 1;
    }
    return 0;
}

int strata_jp2_info(strata_jp2 *file, struct strata_jp2_info *info, char *error, size_t error_capacity) {
    const opj_image_t *image = file->image;
    memset(info, 0, sizeof *info);
    if (image->numcomps == 0 || image->x1 <= image->x0 || image->y1 <= image->y0) {
        fail(NULL, "the image has no component or no area", error, error_capacity);
        return -1;
    }
    if (image->numcomps > 8) {
        // A codestream may declare up to 16 384 components; images have 1 to 4 (5 with CMYK and alpha).
        snprintf(error, error_capacity, "the image has %u components (up to 8 are read)", image->numcomps);
        return -1;
    }
    if (image->comps[0].dx != 1 || image->comps[0].dy != 1) {
        fail(NULL, "the first component is subsampled", error, error_capacity);
        return -1;
    }
    for (uint32_t c = 0; c < image->numcomps; c++) {
        const opj_image_comp_t *comp = &image->comps[c];
        if (comp->prec < 1 || comp->prec > 16) {
            snprintf(error, error_capacity, "component %u has %u-bit samples (1 to 16 are read)", c, comp->prec);
            return -1;
        }
        if (comp->dx < 1 || comp->dy < 1 || comp->dx > 4 || comp->dy > 4) {
            snprintf(error, error_capacity, "component %u is subsampled %ux%u (up to 4x4 is read)", c, comp->dx, comp->dy);
            return -1;
        }
        if (comp->prec > info->precision) info->precision = comp->prec;
        if (is_alpha(image, c)) info->has_alpha = 1;
    }
    info->width = image->x1 - image->x0;
    info->height = image->y1 - image->y0;
    info->origin_x = image->x0;
    info->origin_y = image->y0;
    info->components = image->numcomps;
    info->colour_space = image->color_space;
    info->is_ycc = is_ycc(image);
    opj_codestream_info_v2_t *codestream = opj_get_cstr_info(file->codec);
    if (!codestream) {
        fail(file, "no codestream information", error, error_capacity);
        return -1;
    }
    uint32_t resolutions = 33;
    for (uint32_t c = 0; c < codestream->nbcomps; c++) {
        uint32_t n = codestream->m_default_tile_info.tccp_info[c].numresolutions;
        if (n < resolutions) resolutions = n;
    }
    info->resolutions = resolutions == 33 ? 1 : resolutions;
    info->tile_width = codestream->tdx;
    info->tile_height = codestream->tdy;
    info->tiles_across = codestream->tw;
    info->tiles_down = codestream->th;
    opj_destroy_cstr_info(&codestream);
    return 0;
}

// MARK: - Decode

/// A component's sample as 0…255: its signedness undone, its precision scaled, rounded.
static inline int to8(int32_t value, const opj_image_comp_t *comp) {
    int32_t v = comp->sgnd ? value + (1 << (comp->prec - 1)) : value;
    int32_t top = (1 << comp->prec) - 1;
    if (v < 0) v = 0;
    if (v > top) v = top;
    if (comp->prec == 8) return v;
    return (int)(((int64_t)v * 255 + top / 2) / top);
}

static inline uint8_t clamp8(int v) { return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v; }

uint32_t strata_jp2_threads(const strata_jp2 *file) { return file->threads; }

int strata_jp2_decode(strata_jp2 *file, uint32_t reduce, uint8_t *out, size_t stride, uint32_t width, uint32_t height,
                      char *error, size_t error_capacity) {
    return strata_jp2_decode_region(file, reduce, 0, 0, 0, 0, out, stride, width, height, error, error_capacity);
}

int strata_jp2_decode_region(strata_jp2 *file, uint32_t reduce, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1,
                             uint8_t *out, size_t stride, uint32_t width, uint32_t height, char *error,
                             size_t error_capacity) {
    opj_image_t *image = file->image;
    // The area first, on the reference grid; then the reduction, which scales the image's
    // component sizes and offsets from it (the other order leaves a region's offsets at full
    // resolution, off by its position's reduction).
    if ((x1 > x0 || y1 > y0)
        && !opj_set_decode_area(file->codec, image, (OPJ_INT32)x0, (OPJ_INT32)y0, (OPJ_INT32)x1, (OPJ_INT32)y1)) {
        fail(file, "the region is outside the image", error, error_capacity);
        return -1;
    }
    if (!opj_set_decoded_resolution_factor(file->codec, reduce)) {
        fail(file, "the reduction is beyond the image's resolution levels", error, error_capacity);
        return -1;
    }
    if (!opj_decode(file->codec, file->stream, image) || !opj_end_decompress(file->codec, file->stream)) {
        fail(file, "OpenJPEG could not decode the image", error, error_capacity);
        return -1;
    }
    const opj_image_comp_t *first = &image->comps[0];
    if (first->w != width || first->h != height) {
        snprintf(error, error_capacity, "decoded %ux%u, expected %ux%u", first->w, first->h, width, height);
        return -1;
    }
    for (uint32_t c = 0; c < image->numcomps; c++) {
        if (!image->comps[c].data || image->comps[c].w == 0 || image->comps[c].h == 0) {
            snprintf(error, error_capacity, "component %u was not decoded", c);
            return -1;
        }
    }
    // Colour components and alpha, in order.
    int colour[3] = {-1, -1, -1}, alpha = -1, colours = 0;
    for (uint32_t c = 0; c < image->numcomps; c++) {
        if (is_alpha(image, c)) {
            if (alpha < 0) alpha = (int)c;
        } else if (colours < 3) {
            colour[colours++] = (int)c;
        }
    }
    if (colours == 0) {
        snprintf(error, error_capacity, "the image has only alpha");
        return -1;
    }
    int gray = colours < 3;
    int ycc = !gray && is_ycc(image);
    int cmyk = image->color_space == OPJ_CLRSPC_CMYK && image->numcomps >= 4;
    // Per component, the source column of each output column (nearest neighbour over its own
    // size, which subsampling and the reduction set).
    uint32_t *columns = malloc(sizeof(uint32_t) * (size_t)width * image->numcomps);
    if (!columns) {
        snprintf(error, error_capacity, "out of memory");
        return -1;
    }
    for (uint32_t c = 0; c < image->numcomps; c++) {
        const opj_image_comp_t *comp = &image->comps[c];
        for (uint32_t x = 0; x < width; x++) {
            uint64_t source = (uint64_t)x * comp->w / width;
            columns[(size_t)c * width + x] = (uint32_t)(source < comp->w ? source : comp->w - 1);
        }
    }
    for (uint32_t y = 0; y < height; y++) {
        uint8_t *row = out + (size_t)y * stride;
        const int32_t *planes[4] = {NULL, NULL, NULL, NULL};
        const uint32_t *cols[4] = {NULL, NULL, NULL, NULL};
        const opj_image_comp_t *comps[4] = {NULL, NULL, NULL, NULL};
        int indices[4] = {colour[0], colour[1], colour[2], alpha};
        for (int k = 0; k < 4; k++) {
            if (indices[k] < 0) continue;
            const opj_image_comp_t *comp = &image->comps[indices[k]];
            uint64_t sy = (uint64_t)y * comp->h / height;
            if (sy >= comp->h) sy = comp->h - 1;
            planes[k] = comp->data + sy * comp->w;
            cols[k] = columns + (size_t)indices[k] * width;
            comps[k] = comp;
        }
        const int32_t *k_plane = NULL;
        const uint32_t *k_cols = NULL;
        const opj_image_comp_t *k_comp = NULL;
        if (cmyk) {
            const opj_image_comp_t *comp = &image->comps[3];
            uint64_t sy = (uint64_t)y * comp->h / height;
            if (sy >= comp->h) sy = comp->h - 1;
            k_plane = comp->data + sy * comp->w;
            k_cols = columns + (size_t)3 * width;
            k_comp = comp;
        }
        for (uint32_t x = 0; x < width; x++) {
            int r, g, b;
            int v0 = to8(planes[0][cols[0][x]], comps[0]);
            if (gray) {
                r = g = b = v0;
            } else {
                int v1 = to8(planes[1][cols[1][x]], comps[1]);
                int v2 = to8(planes[2][cols[2][x]], comps[2]);
                if (ycc) {
                    // BT.601 full range, as JFIF and sYCC.
                    float cb = (float)v1 - 128.0f, cr = (float)v2 - 128.0f, luma = (float)v0;
                    r = (int)(luma + 1.402f * cr + 0.5f);
                    g = (int)(luma - 0.344136f * cb - 0.714136f * cr + 0.5f);
                    b = (int)(luma + 1.772f * cb + 0.5f);
                } else {
                    r = v0;
                    g = v1;
                    b = v2;
                }
                if (cmyk) {
                    int k = to8(k_plane[k_cols[x]], k_comp);
                    r = (255 - r) * (255 - k) / 255;
                    g = (255 - g) * (255 - k) / 255;
                    b = (255 - b) * (255 - k) / 255;
                }
            }
            int a = planes[3] ? to8(planes[3][cols[3][x]], comps[3]) : 255;
            uint8_t *pixel = row + (size_t)x * 4;
            if (a == 255) {
                pixel[0] = clamp8(b);
                pixel[1] = clamp8(g);
                pixel[2] = clamp8(r);
            } else {
                pixel[0] = (uint8_t)((clamp8(b) * a + 127) / 255);
                pixel[1] = (uint8_t)((clamp8(g) * a + 127) / 255);
                pixel[2] = (uint8_t)((clamp8(r) * a + 127) / 255);
            }
            pixel[3] = (uint8_t)a;
        }
    }
    free(columns);
    return 0;
}

void strata_jp2_close(strata_jp2 *file) {
    if (!file) return;
    if (file->image) opj_image_destroy(file->image);
    if (file->stream) opj_stream_destroy(file->stream);
    if (file->codec) opj_destroy_codec(file->codec);
    free(file);
}
