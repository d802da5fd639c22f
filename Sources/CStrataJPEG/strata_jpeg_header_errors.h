#ifndef STRATA_JPEG_HEADER_ERRORS_H
#define STRATA_JPEG_HEADER_ERRORS_H
// The error manager of a libjpeg decompressor that reads a header and returns (no decode that
// outlives the call): an error writes its message to `message` (at least JMSG_LENGTH_MAX bytes)
// and jumps to `landing`, which the caller sets with setjmp before any libjpeg call.

#include <setjmp.h>
#include <stdio.h>
#include <jpeglib.h>

typedef struct {
    struct jpeg_error_mgr errors;
    jmp_buf landing;
    char *message;
    int warnings_are_errors;  // a warning (corrupt data) ends the read as an error
} strata_jpeg_header_errors;

static void strata_jpeg_header_error_exit(j_common_ptr info) {
    strata_jpeg_header_errors *errors = (strata_jpeg_header_errors *)info->err;
    (*info->err->format_message)(info, errors->message);
    longjmp(errors->landing, 1);
}

static void strata_jpeg_header_emit_message(j_common_ptr info, int level) {
    strata_jpeg_header_errors *errors = (strata_jpeg_header_errors *)info->err;
    if (level < 0 && errors->warnings_are_errors) strata_jpeg_header_error_exit(info);
}

/// Installs `errors` as `info`'s error manager.
static inline void strata_jpeg_header_errors_install(
    struct jpeg_decompress_struct *info, strata_jpeg_header_errors *errors, char *message, int warnings_are_errors) {
    info->err = jpeg_std_error(&errors->errors);
    errors->errors.error_exit = strata_jpeg_header_error_exit;
    errors->errors.emit_message = strata_jpeg_header_emit_message;
    errors->message = message;
    errors->warnings_are_errors = warnings_are_errors;
}

#endif
