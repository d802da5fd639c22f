#include "CStrataJPEG.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>

/// The most scans a progressive image may have (TurboJPEG's TJFLAG_LIMITSCANS limit).
#define STRATA_JPEG_SCAN_LIMIT 500

struct strata_jpeg_rows {
    struct jpeg_decompress_struct info;
    struct jpeg_error_mgr errors;
    struct jpeg_progress_mgr progress;
    jmp_buf landing;
    int started;
    const uint8_t *data;  // the data of the decode started last
    char message[JMSG_LENGTH_MAX + 64];
};

static void strata_jpeg_error_exit(j_common_ptr info) {
    strata_jpeg_rows *reader = (strata_jpeg_rows *)info->client_data;
    (*info->err->format_message)(info, reader->message);
    longjmp(reader->landing, 1);
}

/// Warnings (level -1: corrupt data, a premature end) end the decode as errors; trace
/// messages (level ≥ 0) are dropped.
static void strata_jpeg_emit_message(j_common_ptr info, int level) {
    if (level < 0) strata_jpeg_error_exit(info);
}

static void strata_jpeg_progress(j_common_ptr info) {
    j_decompress_ptr decompress = (j_decompress_ptr)info;
    strata_jpeg_rows *reader = (strata_jpeg_rows *)info->client_data;
    if (decompress->progressive_mode && decompress->input_scan_number > STRATA_JPEG_SCAN_LIMIT) {
        snprintf(reader->message, sizeof reader->message,
                 "Progressive JPEG image has more than %d scans", STRATA_JPEG_SCAN_LIMIT);
        longjmp(reader->landing, 1);
    }
}

strata_jpeg_rows *strata_jpeg_rows_create(void) {
    strata_jpeg_rows *reader = calloc(1, sizeof *reader);
    if (!reader) return NULL;
    reader->info.err = jpeg_std_error(&reader->errors);
    reader->errors.error_exit = strata_jpeg_error_exit;
    reader->errors.emit_message = strata_jpeg_emit_message;
    reader->info.client_data = reader;
    if (setjmp(reader->landing)) {
        // jpeg_create_decompress fails only when out of memory.
        free(reader);
        return NULL;
    }
    jpeg_create_decompress(&reader->info);
    reader->progress.progress_monitor = strata_jpeg_progress;
    reader->info.progress = &reader->progress;
    return reader;
}

void strata_jpeg_rows_destroy(strata_jpeg_rows *reader) {
    if (!reader) return;
    jpeg_destroy_decompress(&reader->info);
    free(reader);
}

/// Starts a decode; `output` is STRATA_JPEG_OUT_BGRA, _LUMA or _YCC (the last two only for
/// YCbCr files, -3 otherwise, and without block smoothing: see the header).
static int start(
    strata_jpeg_rows *reader, const uint8_t *data, size_t size, int scale_num, int scale_denom, int output,
    uint32_t *width, uint32_t *height, int *color_space) {
    reader->message[0] = 0;
    if (reader->started) jpeg_abort_decompress(&reader->info);
    reader->started = 1;
    if (setjmp(reader->landing)) {
        jpeg_abort_decompress(&reader->info);
        reader->started = 0;
        return -1;
    }
    jpeg_mem_src(&reader->info, data, (unsigned long)size);
    reader->data = data;
    jpeg_read_header(&reader->info, TRUE);
    *color_space = (int)reader->info.jpeg_color_space;
    if (reader->info.jpeg_color_space == JCS_CMYK || reader->info.jpeg_color_space == JCS_YCCK) {
        jpeg_abort_decompress(&reader->info);
        reader->started = 0;
        return -2;
    }
    if (output != STRATA_JPEG_OUT_BGRA && reader->info.jpeg_color_space != JCS_YCbCr) {
        jpeg_abort_decompress(&reader->info);
        reader->started = 0;
        return -3;
    }
    reader->info.scale_num = (unsigned int)scale_num;
    reader->info.scale_denom = (unsigned int)scale_denom;
    switch (output) {
    case STRATA_JPEG_OUT_LUMA:
        reader->info.out_color_space = JCS_GRAYSCALE;  // Y only: the other components are skipped
        reader->info.do_block_smoothing = FALSE;
        break;
    case STRATA_JPEG_OUT_YCC:
        reader->info.out_color_space = JCS_YCbCr;
        reader->info.do_block_smoothing = FALSE;
        break;
    default:
        reader->info.out_color_space = JCS_EXT_BGRA;
        reader->info.do_block_smoothing = TRUE;
    }
    jpeg_start_decompress(&reader->info);
    *width = reader->info.output_width;
    *height = reader->info.output_height;
    return 0;
}

int strata_jpeg_rows_start(
    strata_jpeg_rows *reader, const uint8_t *data, size_t size, int scale_num, int scale_denom,
    uint32_t *width, uint32_t *height, int *color_space) {
    return start(reader, data, size, scale_num, scale_denom, STRATA_JPEG_OUT_BGRA, width, height, color_space);
}

int strata_jpeg_rows_start_split(
    strata_jpeg_rows *reader, const uint8_t *data, size_t size, int scale_num, int scale_denom, int output,
    uint32_t *width, uint32_t *height) {
    int color_space = 0;
    return start(reader, data, size, scale_num, scale_denom, output, width, height, &color_space);
}

int strata_jpeg_rows_read(strata_jpeg_rows *reader, uint8_t *first_row, size_t stride, uint32_t count) {
    if (setjmp(reader->landing)) {
        jpeg_abort_decompress(&reader->info);
        reader->started = 0;
        return -1;
    }
    // libjpeg hands out at most rec_outbuf_height rows a call: a few row pointers suffice.
    JSAMPROW rows[16];
    uint32_t done = 0;
    while (done < count && reader->info.output_scanline < reader->info.output_height) {
        uint32_t batch = count - done;
        if (batch > 16) batch = 16;
        for (uint32_t i = 0; i < batch; i++) rows[i] = first_row + (size_t)(done + i) * stride;
        JDIMENSION read = jpeg_read_scanlines(&reader->info, rows, batch);
        if (read == 0) break;  // only a suspending source returns none; the memory source never does
        done += read;
    }
    return (int)done;
}

int strata_jpeg_rows_finish(strata_jpeg_rows *reader) {
    if (setjmp(reader->landing)) {
        jpeg_abort_decompress(&reader->info);
        reader->started = 0;
        return -1;
    }
    jpeg_finish_decompress(&reader->info);
    reader->started = 0;
    return 0;
}

void strata_jpeg_rows_abort(strata_jpeg_rows *reader) {
    if (reader->started) jpeg_abort_decompress(&reader->info);
    reader->started = 0;
}

size_t strata_jpeg_rows_consumed(const strata_jpeg_rows *reader) {
    if (!reader->started || !reader->info.src || !reader->data) return 0;
    return (size_t)(reader->info.src->next_input_byte - reader->data);
}

const char *strata_jpeg_rows_message(const strata_jpeg_rows *reader) { return reader->message; }
