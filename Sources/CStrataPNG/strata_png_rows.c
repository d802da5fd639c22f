// libpng's row API over bytes in memory: every call that may end in png_error sets its landing
// point first, and libpng's messages are kept per reader instead of printed.
#include "CStrataPNG.h"

#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct strata_png_rows {
    png_structp png;
    png_infop info;
    const uint8_t *bytes;
    size_t count;
    size_t offset;
    uint32_t height;
    uint32_t row;
    char message[256];
};

static void error_fn(png_structp png, png_const_charp text) {
    strata_png_rows *reader = png_get_error_ptr(png);
    if (reader->message[0] == '\0') {
        snprintf(reader->message, sizeof reader->message, "%s", text ? text : "libpng error");
    }
    png_longjmp(png, 1);
}

static void warning_fn(png_structp png, png_const_charp text) {
    (void)png;
    (void)text;
}

static void read_fn(png_structp png, png_bytep data, size_t length) {
    strata_png_rows *reader = png_get_io_ptr(png);
    if (length > reader->count - reader->offset) {
        snprintf(reader->message, sizeof reader->message, "truncated: the file ends before the image does");
        png_longjmp(png, 1);
    }
    memcpy(data, reader->bytes + reader->offset, length);
    reader->offset += length;
}

static void report(const strata_png_rows *reader, char *error, size_t error_capacity) {
    if (error_capacity > 0) {
        snprintf(error, error_capacity, "%s", reader->message[0] ? reader->message : "libpng error");
    }
}

strata_png_rows *strata_png_rows_open(const void *bytes, size_t count, struct strata_png_info *info, char *error,
                                      size_t error_capacity) {
    memset(info, 0, sizeof *info);
    strata_png_rows *reader = calloc(1, sizeof *reader);
    if (reader == NULL) {
        snprintf(error, error_capacity, "cannot allocate the PNG reader");
        return NULL;
    }
    reader->bytes = bytes;
    reader->count = count;
    reader->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, reader, error_fn, warning_fn);
    if (reader->png == NULL || (reader->info = png_create_info_struct(reader->png)) == NULL) {
        snprintf(error, error_capacity, "cannot allocate libpng's reader");
        strata_png_rows_destroy(reader);
        return NULL;
    }
    if (setjmp(png_jmpbuf(reader->png))) {
        report(reader, error, error_capacity);
        strata_png_rows_destroy(reader);
        return NULL;
    }
    png_set_read_fn(reader->png, reader, read_fn);
    png_read_info(reader->png, reader->info);
    png_uint_32 width = 0, height = 0;
    int depth = 0, colour = 0, interlace = 0;
    png_get_IHDR(reader->png, reader->info, &width, &height, &depth, &colour, &interlace, NULL, NULL);
    int has_trns = png_get_valid(reader->png, reader->info, PNG_INFO_tRNS) != 0;
    // The simplified API's 8-bit sRGB output: the file's gamma (gAMA, else sRGB's) to sRGB's.
    png_set_alpha_mode(reader->png, PNG_ALPHA_PNG, PNG_DEFAULT_sRGB);
    if (colour == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(reader->png);
    if (has_trns) png_set_tRNS_to_alpha(reader->png);
    if (colour == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(reader->png);
    if (depth == 16) png_set_scale_16(reader->png);
    if (colour == PNG_COLOR_TYPE_GRAY || colour == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(reader->png);
    if (!(colour & PNG_COLOR_MASK_ALPHA) && !has_trns) png_set_filler(reader->png, 0xFF, PNG_FILLER_AFTER);
    png_set_bgr(reader->png);
    if (interlace != PNG_INTERLACE_NONE) png_set_interlace_handling(reader->png);
    png_read_update_info(reader->png, reader->info);
    if (png_get_rowbytes(reader->png, reader->info) != (size_t)width * 4) {
        snprintf(reader->message, sizeof reader->message, "libpng gives %zu bytes a row, not %u × 4",
                 png_get_rowbytes(reader->png, reader->info), width);
        report(reader, error, error_capacity);
        strata_png_rows_destroy(reader);
        return NULL;
    }
    reader->height = height;
    info->width = width;
    info->height = height;
    info->interlaced = interlace != PNG_INTERLACE_NONE;
    info->has_alpha = (colour & PNG_COLOR_MASK_ALPHA) || has_trns;
    return reader;
}

int strata_png_rows_read(strata_png_rows *reader, uint8_t *destination, size_t stride, uint32_t rows, char *error,
                         size_t error_capacity) {
    if (rows > reader->height - reader->row) {
        snprintf(error, error_capacity, "rows %u…%u are past the image's %u", reader->row, reader->row + rows,
                 reader->height);
        return -1;
    }
    if (setjmp(png_jmpbuf(reader->png))) {
        report(reader, error, error_capacity);
        return -1;
    }
    for (uint32_t i = 0; i < rows; i++) {
        png_read_row(reader->png, destination + (size_t)i * stride, NULL);
    }
    reader->row += rows;
    return 0;
}

size_t strata_png_rows_consumed(const strata_png_rows *reader) { return reader->offset; }

void strata_png_rows_destroy(strata_png_rows *reader) {
    if (reader == NULL) return;
    if (reader->png != NULL) {
        png_destroy_read_struct(&reader->png, reader->info != NULL ? &reader->info : NULL, NULL);
    }
    free(reader);
}
