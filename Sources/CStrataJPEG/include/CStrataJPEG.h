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

/// What a decode of one half of a split progressive file writes (`strata_jpeg_split`).
enum {
    /// Premultiplied BGRA, 4 bytes a pixel (`strata_jpeg_rows_start`).
    STRATA_JPEG_OUT_BGRA = 0,
    /// The Y component alone, 1 byte a pixel: libjpeg skips the inverse DCT and upsampling of
    /// the other components.
    STRATA_JPEG_OUT_LUMA = 1,
    /// Y, Cb, Cr, 3 bytes a pixel, the chroma upsampled as the BGRA decode upsamples it.
    STRATA_JPEG_OUT_YCC = 2,
};

/// `strata_jpeg_rows_start` for one half of a split progressive file (`strata_jpeg_split`):
/// `output` is STRATA_JPEG_OUT_LUMA or STRATA_JPEG_OUT_YCC. Block smoothing is off: libjpeg
/// applies it only to components whose scans are incomplete, which a whole file has none of,
/// and each half lacks the other half's scans on purpose. Returns 0, -1 on an error, -2 for a
/// CMYK or YCCK file and -3 for another colour space that is not YCbCr (nothing started).
int strata_jpeg_rows_start_split(
    strata_jpeg_rows *reader, const uint8_t *data, size_t size, int scale_num, int scale_denom, int output,
    uint32_t *width, uint32_t *height);

/// Splits a progressive JPEG (SOF2, three components with distinct ids, the first with the
/// largest sampling factors, at most 500 scans up to EOI, whose scans complete coefficients 0–9
/// of every component, so that libjpeg would not smooth blocks) into two JPEGs: `luma` gets every DC scan and
/// the first component's AC scans, `chroma` every DC scan and the other components' AC scans;
/// both get every other segment in order. Progressive AC scans each hold one component, so
/// each half decodes its own components exactly as the whole file does. Either buffer may be
/// NULL (a check only); otherwise each needs `size` bytes. Returns 1 with both sizes set, or 0
/// (nothing to split, or anything unusual: a baseline file, a missing EOI, a stray byte) with
/// nothing promised about the buffers. Reads only; cost: one pass of `memchr` over the data.
int strata_jpeg_split(
    const uint8_t *data, size_t size, uint8_t *luma, size_t *luma_size, uint8_t *chroma, size_t *chroma_size);

/// Decodes up to `count` rows into `first_row`, `first_row + stride`, …; returns how many were
/// decoded (0 once all are), or -1 on an error.
int strata_jpeg_rows_read(strata_jpeg_rows *reader, uint8_t *first_row, size_t stride, uint32_t count);

/// Finishes a decode whose rows have all been read (reads to the end of the data, so trailing
/// corruption is reported). Returns 0 or -1.
int strata_jpeg_rows_finish(strata_jpeg_rows *reader);

/// Abandons a decode (after an error or early); the reader can start another.
void strata_jpeg_rows_abort(strata_jpeg_rows *reader);

/// The last error's message (empty when none).
/// Bytes of the data libjpeg has taken so far in the decode started last (its source's
/// `next_input_byte`): it never reads what lies before again. 0 when nothing is started.
size_t strata_jpeg_rows_consumed(const strata_jpeg_rows *reader);

const char *strata_jpeg_rows_message(const strata_jpeg_rows *reader);

/// Reads the ICC profile of the JPEG of `size` bytes at `data` with libjpeg-turbo's
/// `jpeg_read_icc_profile` (every APP2 `ICC_PROFILE` chunk, in sequence order), parsing the
/// header only. Returns 1 with `*icc` (malloc'd: free it with `strata_jpeg_free`) and
/// `*icc_size` set; 0 when the file has no profile or its chunks are malformed (missing,
/// duplicated or misnumbered); -1 when the header cannot be read (message in `message`, at
/// least JMSG_LENGTH_MAX bytes).
int strata_jpeg_read_icc(const uint8_t *data, size_t size, uint8_t **icc, unsigned int *icc_size, char *message);

/// Frees what `strata_jpeg_read_icc` allocated.
void strata_jpeg_free(void *pointer);

/// A baseline JPEG read at 1/8 scale with its entropy-coded data decoded on several threads
/// (see strata_jpeg_eighth.c): each output pixel is the mean of its 8 × 8 block, or of a
/// quadrant of a subsampled chroma block. Not thread-safe, except that the parts of one round
/// (`strata_jpeg_eighth_decode_part`, each index once) may run on different threads at once.
typedef struct strata_jpeg_eighth strata_jpeg_eighth;

/// Reads the header of `size` bytes at `data` (which must stay valid until the decoder is
/// closed). Returns 1 with `*out`, `*width` and `*height` (⌈image / 8⌉) set; 0 when the file is
/// not one this decoder takes (progressive, arithmetic-coded, 12-bit, not YCbCr or grayscale,
/// several scans, sampling factors above 2): use libjpeg; -1 when libjpeg cannot read the
/// header (message in `message`, at least JMSG_LENGTH_MAX bytes).
int strata_jpeg_eighth_open(
    const uint8_t *data, size_t size, strata_jpeg_eighth **out, uint32_t *width, uint32_t *height, char *message);
void strata_jpeg_eighth_close(strata_jpeg_eighth *decoder);

/// The raw bytes of data each part of a round covers (1 MiB unless set; at least 64).
void strata_jpeg_eighth_set_part_bytes(strata_jpeg_eighth *decoder, size_t bytes);

/// Plans a round of `parts` parts (at most 64): part 0 continues from the true state, the
/// others start speculatively further on (`*speculative` of them have data to start in).
/// Returns the number of parts.
int strata_jpeg_eighth_plan(strata_jpeg_eighth *decoder, int parts, int *speculative);

/// Decodes part `index` of the planned round. Returns 0, or -1 when the part met corrupt data
/// (reported by `strata_jpeg_eighth_finish_round`).
int strata_jpeg_eighth_decode_part(strata_jpeg_eighth *decoder, int index);

/// Joins the round's parts: the true decode walks on until each speculative part is in step
/// with it, or decodes that part's range itself. Adds the parts that were in step to
/// `*synced_parts`. Returns 1 while there is more to decode, 0 when the image is complete,
/// -1 on corrupt data (message in `strata_jpeg_eighth_message`). Then the round's pixels are
/// written (`strata_jpeg_eighth_write_slice`) and taken (`strata_jpeg_eighth_rows`).
int strata_jpeg_eighth_finish_round(strata_jpeg_eighth *decoder, int64_t *synced_parts);

/// Writes slice `index` of `slices` of the round's pixels (BGRA, alpha 255); the slices of
/// one round may be written on different threads at once.
void strata_jpeg_eighth_write_slice(strata_jpeg_eighth *decoder, int index, int slices);

/// The rows the round made complete: returns how many, at `*rows`, `*stride` apart, the first
/// being output row `*first_row`; valid until the next round's finish.
uint32_t strata_jpeg_eighth_rows(strata_jpeg_eighth *decoder, const uint8_t **rows, size_t *stride, uint32_t *first_row);

/// The last error's message.
/// Bytes of the data before the true decode's position (the start of the next round): no
/// later round reads them.
size_t strata_jpeg_eighth_consumed(const strata_jpeg_eighth *decoder);

const char *strata_jpeg_eighth_message(const strata_jpeg_eighth *decoder);

#endif
