#ifndef STRATA_CSTRATAJPEG_H
#define STRATA_CSTRATAJPEG_H
// A JPEG decode that hands its rows over as it goes (libjpeg's scanline API), so that a
// resample can start on the first rows while the rest are decoded. libjpeg reports errors by
// longjmp; every entry point here sets its own landing point, so no longjmp crosses a Swift
// frame. Warnings (corrupt or truncated data) are errors, as TurboJPEG's TJFLAG_STOPONWARNING
// makes them, and a progressive image with more than 500 scans is refused (TJFLAG_LIMITSCANS).

#include <stddef.h>
#include <stdint.h>

typedef struct strata_jpeg_rows strata_jpeg_rows;

/// A reader (a libjpeg decompressor and its error manager); NULL when out of memory.
strata_jpeg_rows *strata_jpeg_rows_create(void);
void strata_jpeg_rows_destroy(strata_jpeg_rows *reader);

/// The JPEG colour spaces the reader reports (libjpeg's J_COLOR_SPACE values).
enum {
    STRATA_JPEG_GRAY = 1,
    STRATA_JPEG_RGB = 2,
    STRATA_JPEG_YCBCR = 3,
    STRATA_JPEG_CMYK = 4,
    STRATA_JPEG_YCCK = 5,
};

/// Reads the header of `size` bytes at `data` (which must stay valid until the decode ends) and
/// starts a decode at `scale_num / scale_denom` into premultiplied BGRA (alpha 255).
/// `color_space` receives the file's colour space; a CMYK or YCCK file is refused with -2
/// (nothing started). Returns 0, -1 on an error (message in `strata_jpeg_rows_message`) or -2.
int strata_jpeg_rows_start(
    strata_jpeg_rows *reader, const uint8_t *data, size_t size, int scale_num, int scale_denom,
    uint32_t *width, uint32_t *height, int *color_space);

/// Decodes up to `count` rows into `first_row`, `first_row + stride`, …; returns how many were
/// decoded (0 once all are), or -1 on an error.
int strata_jpeg_rows_read(strata_jpeg_rows *reader, uint8_t *first_row, size_t stride, uint32_t count);

/// Finishes a decode whose rows have all been read (reads to the end of the data, so trailing
/// corruption is reported). Returns 0 or -1.
int strata_jpeg_rows_finish(strata_jpeg_rows *reader);

/// Abandons a decode (after an error or early); the reader can start another.
void strata_jpeg_rows_abort(strata_jpeg_rows *reader);

/// The last error's message (empty when none).
const char *strata_jpeg_rows_message(const strata_jpeg_rows *reader);

#endif
