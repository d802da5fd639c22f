// libtiff over bytes in memory, with its messages kept per file instead of printed: what Swift
// cannot do itself (libtiff's error handlers take a `va_list`).
#ifndef C_STRATA_TIFF_H
#define C_STRATA_TIFF_H

#include <stddef.h>
#include <stdint.h>
#include <tiffio.h>

/// Opens `count` bytes at `bytes` (not copied: they must outlive the file) read-only, libtiff
/// reading them as a mapped file. No single allocation of libtiff's may exceed
/// `max_single_allocation` bytes (0: libtiff's default). Returns NULL when the bytes are not a
/// TIFF libtiff can open, with its message in `error` (at most `error_capacity` bytes, ended by
/// NUL). Close with `TIFFClose`.
TIFF *strata_tiff_open(const void *bytes, size_t count, size_t max_single_allocation, char *error,
                       size_t error_capacity);

/// libtiff's first error message since the file was opened or the last call to
/// `strata_tiff_clear_error`, or "" when there was none. Valid until the file is closed.
const char *strata_tiff_error(TIFF *tiff);

/// Forgets the error message.
void strata_tiff_clear_error(TIFF *tiff);

/// What Strata reads of the current directory (the first image): its size, the `Orientation`
/// tag (1…8, as EXIF's), whether libtiff's RGBA reader gives it alpha, how it is stored, the
/// rows one strip or tile holds, and the ICC profile (`icc` points into libtiff's copy, valid
/// while the file is open).
struct strata_tiff_features {
    uint32_t width;
    uint32_t height;
    uint16_t orientation;
    uint16_t photometric;
    uint16_t samples_per_pixel;
    uint16_t bits_per_sample;
    int has_alpha;
    int is_tiled;
    uint32_t band_rows;
    uint32_t icc_count;
    const void *icc;
};

/// Reads the features; 0 on success, else -1 with libtiff's reason in `error` (an image
/// libtiff's RGBA reader cannot convert: a float or a 32-bit image, an unknown photometric).
int strata_tiff_features(TIFF *tiff, struct strata_tiff_features *features, char *error, size_t error_capacity);

/// Decodes `rows` rows from `first_row` of the current directory as libtiff's RGBA pixels
/// (one `uint32_t` each, R in the low byte; alpha premultiplied), in the order they are stored
/// (the orientation is not applied), into `raster` (`width` pixels a row, no padding).
/// 0 on success, else -1 with the reason in `error`.
int strata_tiff_read_rows(TIFF *tiff, uint32_t *raster, uint32_t first_row, uint32_t rows, char *error,
                          size_t error_capacity);

/// Where the current directory's strips or tiles whose rows all lie within `rows` rows from
/// `first_row` are in the file: from the lowest offset (`*start`) to the end of the highest
/// (`*end`), or 0 and 0 when there are none, or when other data takes more than half of that
/// extent (planes stored apart): for a reader that has decoded those rows and will not read
/// them again, so that the pages in between can leave memory.
void strata_tiff_rows_extent(TIFF *tiff, uint32_t first_row, uint32_t rows, uint64_t *start, uint64_t *end);

/// One image of a file: its size, whether it is tiled, the size of the blocks it is decoded
/// in (a tile, or the whole width × the rows of a strip), and its directory's offset (which
/// `strata_tiff_read_region` selects it by).
struct strata_tiff_level {
    uint32_t width;
    uint32_t height;
    uint64_t offset;
    int is_tiled;
    uint32_t block_width;
    uint32_t block_height;
};

/// The file's images: the first, then the following pages, then the first image's SubIFDs (at
/// most `capacity`); the first image is current again afterwards. Returns the count (0 when the
/// first cannot be read).
int strata_tiff_levels(TIFF *tiff, struct strata_tiff_level *levels, int capacity);

/// The `width` × `height` region at `x`, `y` of the image whose directory is at `directory`,
/// as RGBA (R | G << 8 | B << 16 | A << 24, alpha associated), rows top-down as stored.
int strata_tiff_read_region(TIFF *tiff, uint64_t directory, uint32_t *raster, uint32_t x, uint32_t y, uint32_t width,
                            uint32_t height, char *error, size_t error_capacity);

#endif
