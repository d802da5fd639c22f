// OpenJPEG over bytes in memory, its messages kept per decode instead of printed, and the
// components it decodes (32-bit integers per sample, each plane at its own subsampling and
// precision) turned into premultiplied BGRA: what Swift cannot do itself (OpenJPEG's stream
// and message callbacks) or should not do sample by sample.
#ifndef C_STRATA_JP2_H
#define C_STRATA_JP2_H

#include <stddef.h>
#include <stdint.h>

/// A JP2 file or a raw J2K codestream opened over bytes in memory (not copied: they must
/// outlive it), its main header read. Close with `strata_jp2_close`.
typedef struct strata_jp2 strata_jp2;

/// What Strata reads of the main header: the image's size (of its reference grid's image
/// area), its components, the resolution levels every component has (a decode may reduce by
/// up to `resolutions - 1` halvings), the tiling and the colour space. (OpenJPEG 2.5.0 hands
/// a `colr` box's ICC profile over only with the decoded image: Swift reads it from the box.)
struct strata_jp2_info {
    uint32_t width;
    uint32_t height;
    /// Where the image area starts on the reference grid: a reduced size is
    /// ceil((origin + size) / 2^r) - ceil(origin / 2^r).
    uint32_t origin_x;
    uint32_t origin_y;
    uint32_t components;
    /// The largest precision of a component, in bits (1…31).
    uint32_t precision;
    /// OpenJPEG's `OPJ_COLOR_SPACE` (-1 unknown, 0 unspecified, 1 sRGB, 2 gray, 3 sYCC, 4 eYCC, 5 CMYK).
    int32_t colour_space;
    /// Whether the image has an alpha component (a `cdef` box says so, or a 2nd of 2 or 4th of 4).
    int32_t has_alpha;
    /// Whether the colour is read as luma and chroma (sYCC, or 3 components with subsampled chroma).
    int32_t is_ycc;
    uint32_t resolutions;
    uint32_t tile_width;
    uint32_t tile_height;
    uint32_t tiles_across;
    uint32_t tiles_down;
};

/// Opens `length` bytes at `bytes`: a JP2 file when `codestream` is 0, a J2K codestream
/// otherwise, and reads its main header (strict mode: a truncated stream is an error); a decode
/// will run on `threads` threads (OpenJPEG takes the count before the header). NULL on failure,
/// with OpenJPEG's message in `error` (at most `error_capacity` bytes, ended by NUL).
strata_jp2 *strata_jp2_open(const void *bytes, size_t length, int codestream, uint32_t threads, char *error,
                            size_t error_capacity);

/// The threads the decoder was given (1 when OpenJPEG was built without thread support or
/// refused the count).
uint32_t strata_jp2_threads(const strata_jp2 *file);

/// The header's facts; 0, or -1 with a message (no component or more than 8, a subsampled
/// first component, subsampling beyond 4×4, a precision above 16 bits).
int strata_jp2_info(strata_jp2 *file, struct strata_jp2_info *info, char *error, size_t error_capacity);

/// Decodes the whole image `reduce` halvings down (0: full resolution) into premultiplied BGRA rows of `stride` bytes at `out`, which must be exactly
/// `width` × `height`: the size of the first component at that reduction. Gray is spread to
/// the three channels, sYCC converted with BT.601's full-range matrix, samples of any
/// precision rounded to 8 bits, subsampled components spread by nearest neighbour. 0, or -1
/// with OpenJPEG's message. Once per file.
int strata_jp2_decode(strata_jp2 *file, uint32_t reduce, uint8_t *out, size_t stride, uint32_t width,
                      uint32_t height, char *error, size_t error_capacity);

/// The same for the region [x0, x1) × [y0, y1) of the reference grid (full-resolution
/// coordinates, the image area's origin included; all 0: the whole image): OpenJPEG decodes
/// only the tiles and code-blocks it touches. `width` × `height` must be its size `reduce`
/// halvings down: ceil(x1 / 2^reduce) - ceil(x0 / 2^reduce) by the same for y. Once per file.
int strata_jp2_decode_region(strata_jp2 *file, uint32_t reduce, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1,
                             uint8_t *out, size_t stride, uint32_t width, uint32_t height, char *error,
                             size_t error_capacity);

void strata_jp2_close(strata_jp2 *file);

#endif
