// libpng's row API over bytes in memory, for decodes that hand over their rows as they go (a
// tile pyramid's streaming pass): what Swift cannot do itself (libpng reports errors by
// `longjmp`, whose landing points must be set in C).
#ifndef C_STRATA_PNG_H
#define C_STRATA_PNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct strata_png_rows strata_png_rows;

/// What the header says.
struct strata_png_info {
    uint32_t width;
    uint32_t height;
    /// Adam7: the rows come in seven passes, so they cannot be handed over one by one.
    int interlaced;
    /// An alpha channel or a `tRNS` chunk.
    int has_alpha;
};

/// Opens `count` bytes at `bytes` (not copied: they must outlive the reader) and reads the
/// chunks up to the first `IDAT`; the rows then come as 8-bit BGRA with straight alpha (255
/// when the file has none), in sRGB's encoding: palette and gray expanded, 16 bits scaled, the
/// file's `gAMA` applied as libpng's simplified API applies it. NULL on failure, with libpng's
/// reason in `error` (at most `error_capacity` bytes, ended by NUL). Free with
/// `strata_png_rows_destroy`.
strata_png_rows *strata_png_rows_open(const void *bytes, size_t count, struct strata_png_info *info, char *error,
                                      size_t error_capacity);

/// The next `rows` rows of a non-interlaced image into `destination` (rows `stride` bytes
/// apart, `width` × 4 bytes each). 0 on success, else -1 with the reason in `error` (a file
/// that ends early: "truncated"); the reader is unusable after a failure.
int strata_png_rows_read(strata_png_rows *reader, uint8_t *destination, size_t stride, uint32_t rows, char *error,
                         size_t error_capacity);

/// Bytes of the file libpng has taken so far: it never reads the ones before again.
size_t strata_png_rows_consumed(const strata_png_rows *reader);

void strata_png_rows_destroy(strata_png_rows *reader);

#endif
