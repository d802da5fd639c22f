// Strata's HEVC decoder for libheif: libde265 behind libheif's decoder-plugin interface
// (heif_plugin.h, API version 3), registered above libheif's own libde265 plugin so that one
// image's decode uses several cores. libheif hands the plugin the item's hvcC parameter sets and
// then its data, both as NAL units with 4-byte big-endian lengths; the plugin returns the first
// picture as YCbCr (or monochrome) planes, with the bitstream's colour description (VUI) as an
// nclx profile, which libheif replaces with the container's `colr` box when the file has one.
#include "CStrataHEIF.h"

#include <libde265/de265.h>
#include <libheif/heif_plugin.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static atomic_int worker_threads = 0;

struct strata_hevc_decoder {
    de265_decoder_context *context;
    int strict;
};

static const char *plugin_name(void) { return "Strata: libde265 HEVC decoder with worker threads"; }

static void plugin_init(void) { de265_init(); }

static void plugin_deinit(void) { de265_free(); }

static int plugin_supports(enum heif_compression_format format) {
    // libheif's own libde265 plugin answers 100; the highest priority wins.
    return format == heif_compression_HEVC ? 120 : 0;
}

static struct heif_error success(void) {
    struct heif_error error = {heif_error_Ok, heif_suberror_Unspecified, "Success"};
    return error;
}

static struct heif_error failure(enum heif_suberror_code code, const char *message) {
    struct heif_error error = {heif_error_Decoder_plugin_error, code, message};
    return error;
}

static struct heif_error new_decoder(void **out) {
    struct strata_hevc_decoder *decoder = calloc(1, sizeof *decoder);
    if (decoder == NULL) {
        return failure(heif_suberror_Unspecified, "cannot allocate the HEVC decoder");
    }
    decoder->context = de265_new_decoder();
    if (decoder->context == NULL) {
        free(decoder);
        return failure(heif_suberror_Unspecified, "libde265 cannot allocate a decoder");
    }
    int threads = atomic_load_explicit(&worker_threads, memory_order_relaxed);
    // Without workers (or when they cannot start) libde265 decodes on the calling thread.
    if (threads > 1) {
        (void)de265_start_worker_threads(decoder->context, threads);
    }
    *out = decoder;
    return success();
}

static void free_decoder(void *raw) {
    struct strata_hevc_decoder *decoder = raw;
    if (decoder == NULL) {
        return;
    }
    de265_free_decoder(decoder->context);
    free(decoder);
}

static void set_strict_decoding(void *raw, int flag) { ((struct strata_hevc_decoder *)raw)->strict = flag; }

static struct heif_error push_data(void *raw, const void *data, size_t size) {
    struct strata_hevc_decoder *decoder = raw;
    const uint8_t *bytes = data;
    size_t at = 0;
    while (at < size) {
        if (size - at < 4) {
            return failure(heif_suberror_End_of_data, "HEVC data ends inside a NAL unit's length");
        }
        uint32_t length = (uint32_t)bytes[at] << 24 | (uint32_t)bytes[at + 1] << 16 | (uint32_t)bytes[at + 2] << 8 |
                          (uint32_t)bytes[at + 3];
        at += 4;
        if (length > size - at || length > INT32_MAX) {
            return failure(heif_suberror_End_of_data, "an HEVC NAL unit is longer than the data left");
        }
        if (de265_push_NAL(decoder->context, bytes + at, (int)length, 0, NULL) != DE265_OK) {
            return failure(heif_suberror_Unspecified, "libde265 refused a NAL unit");
        }
        at += length;
    }
    return success();
}

/// Copies `picture`'s planes into a new libheif image.
static struct heif_error convert(const struct de265_image *picture, struct heif_image **out) {
    enum de265_chroma chroma = de265_get_chroma_format(picture);
    int monochrome = chroma == de265_chroma_mono;
    enum heif_chroma heif_chroma;
    switch (chroma) {
    case de265_chroma_mono: heif_chroma = heif_chroma_monochrome; break;
    case de265_chroma_420: heif_chroma = heif_chroma_420; break;
    case de265_chroma_422: heif_chroma = heif_chroma_422; break;
    case de265_chroma_444: heif_chroma = heif_chroma_444; break;
    default: return failure(heif_suberror_Unsupported_color_conversion, "unknown HEVC chroma format");
    }
    int width = de265_get_image_width(picture, 0), height = de265_get_image_height(picture, 0);
    if (width <= 0 || height <= 0) {
        return failure(heif_suberror_Invalid_image_size, "libde265 decoded an empty picture");
    }
    struct heif_error error = heif_image_create(
        width, height, monochrome ? heif_colorspace_monochrome : heif_colorspace_YCbCr, heif_chroma, out);
    if (error.code != heif_error_Ok) {
        return error;
    }
    static const enum heif_channel channels[3] = {heif_channel_Y, heif_channel_Cb, heif_channel_Cr};
    int depth = de265_get_bits_per_pixel(picture, 0);
    for (int c = 0; c < (monochrome ? 1 : 3); c++) {
        int plane_width = de265_get_image_width(picture, c), plane_height = de265_get_image_height(picture, c);
        if (de265_get_bits_per_pixel(picture, c) != depth) {
            heif_image_release(*out);
            *out = NULL;
            return failure(heif_suberror_Unsupported_color_conversion, "HEVC planes of different bit depths");
        }
        if (plane_width <= 0 || plane_height <= 0) {
            heif_image_release(*out);
            *out = NULL;
            return failure(heif_suberror_Invalid_image_size, "libde265 decoded an empty plane");
        }
        int source_stride = 0;
        const uint8_t *source = de265_get_image_plane(picture, c, &source_stride);
        error = heif_image_add_plane(*out, channels[c], plane_width, plane_height, depth);
        if (error.code != heif_error_Ok || source == NULL) {
            heif_image_release(*out);
            *out = NULL;
            return error.code != heif_error_Ok ? error : failure(heif_suberror_Unspecified, "libde265 gave no plane");
        }
        int destination_stride = 0;
        uint8_t *destination = heif_image_get_plane(*out, channels[c], &destination_stride);
        size_t row = (size_t)plane_width * (size_t)((depth + 7) / 8);
        for (int y = 0; y < plane_height; y++) {
            memcpy(destination + (size_t)y * (size_t)destination_stride, source + (size_t)y * (size_t)source_stride, row);
        }
    }
    // The bitstream's own colour description; libheif prefers the container's `colr` nclx.
    struct heif_color_profile_nclx *nclx = heif_nclx_color_profile_alloc();
    if (nclx != NULL) {
        // Values outside the tables are refused by the setters and stay "unspecified".
        (void)heif_nclx_color_profile_set_color_primaries(nclx, (uint16_t)de265_get_image_colour_primaries(picture));
        (void)heif_nclx_color_profile_set_transfer_characteristics(
            nclx, (uint16_t)de265_get_image_transfer_characteristics(picture));
        (void)heif_nclx_color_profile_set_matrix_coefficients(
            nclx, (uint16_t)de265_get_image_matrix_coefficients(picture));
        nclx->full_range_flag = (uint8_t)(de265_get_image_full_range_flag(picture) != 0);
        (void)heif_image_set_nclx_color_profile(*out, nclx);
        heif_nclx_color_profile_free(nclx);
    }
    return success();
}

static struct heif_error decode_image(void *raw, struct heif_image **out) {
    struct strata_hevc_decoder *decoder = raw;
    *out = NULL;
    if (de265_flush_data(decoder->context) != DE265_OK) {
        return failure(heif_suberror_Unspecified, "libde265 cannot end the stream");
    }
    int more = 0;
    do {
        more = 0;
        de265_error status = de265_decode(decoder->context, &more);
        if (status != DE265_OK && status != DE265_ERROR_WAITING_FOR_INPUT_DATA) {
            if (decoder->strict || !de265_isOK(status)) {
                return failure(heif_suberror_Unspecified, de265_get_error_text(status));
            }
        }
        const struct de265_image *picture = de265_get_next_picture(decoder->context);
        if (picture != NULL) {
            // An image item holds one picture: the first is it.
            struct heif_error error = convert(picture, out);
            de265_release_next_picture(decoder->context);
            return error;
        }
    } while (more);
    return failure(heif_suberror_Unspecified, "the HEVC data holds no picture");
}

static const struct heif_decoder_plugin plugin = {
    .plugin_api_version = 3,
    .get_plugin_name = plugin_name,
    .init_plugin = plugin_init,
    .deinit_plugin = plugin_deinit,
    .does_support_format = plugin_supports,
    .new_decoder = new_decoder,
    .free_decoder = free_decoder,
    .push_data = push_data,
    .decode_image = decode_image,
    .set_strict_decoding = set_strict_decoding,
    .id_name = "strata-libde265",
};

int strata_heif_register_hevc_decoder(int threads) {
    strata_heif_set_hevc_decoder_threads(threads);
    struct heif_error error = heif_register_decoder_plugin(&plugin);
    return error.code == heif_error_Ok ? 0 : (int)error.code;
}

void strata_heif_set_hevc_decoder_threads(int threads) {
    atomic_store_explicit(&worker_threads, threads < 1 ? 0 : threads, memory_order_relaxed);
}

int strata_heif_hevc_decoder_threads(void) { return atomic_load_explicit(&worker_threads, memory_order_relaxed); }
