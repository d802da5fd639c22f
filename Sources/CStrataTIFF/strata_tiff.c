// libtiff over bytes in memory: the client procedures of TIFFClientOpenExt over one buffer
// (read, seek, size, and the buffer as the file's mapping, so strips are decoded from it without
// a copy) and error and warning handlers that keep the first error per file (libtiff's default
// handlers print to stderr).
#include "CStrataTIFF.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct source {
    const uint8_t *bytes;
    uint64_t count;
    uint64_t offset;
    char error[256];
};

static tmsize_t read_proc(thandle_t handle, void *buffer, tmsize_t size) {
    struct source *s = handle;
    if (size <= 0 || s->offset >= s->count) {
        return 0;
    }
    uint64_t left = s->count - s->offset;
    uint64_t n = (uint64_t)size < left ? (uint64_t)size : left;
    memcpy(buffer, s->bytes + s->offset, (size_t)n);
    s->offset += n;
    return (tmsize_t)n;
}

static tmsize_t write_proc(thandle_t handle, void *buffer, tmsize_t size) {
    (void)handle;
    (void)buffer;
    (void)size;
    return -1;
}

static toff_t seek_proc(thandle_t handle, toff_t offset, int whence) {
    struct source *s = handle;
    uint64_t base;
    switch (whence) {
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = s->offset; break;
    case SEEK_END: base = s->count; break;
    default: return (toff_t)-1;
    }
    if (offset > UINT64_MAX - base) {
        return (toff_t)-1;
    }
    // Past the end is allowed (as for a file); reads there return nothing.
    s->offset = base + offset;
    return s->offset;
}

static int close_proc(thandle_t handle) {
    free(handle);
    return 0;
}

static toff_t size_proc(thandle_t handle) { return ((struct source *)handle)->count; }

static int map_proc(thandle_t handle, void **base, toff_t *size) {
    struct source *s = handle;
    // Opened read-only: libtiff reads the mapping, never writes it.
    *base = (void *)s->bytes;
    *size = s->count;
    return 1;
}

static void unmap_proc(thandle_t handle, void *base, toff_t size) {
    (void)handle;
    (void)base;
    (void)size;
}

static int error_handler(TIFF *tiff, void *user_data, const char *module, const char *format, va_list arguments) {
    (void)tiff;
    (void)module;
    struct source *s = user_data;
    if (s->error[0] == '\0') {
        vsnprintf(s->error, sizeof s->error, format, arguments);
    }
    return 1;  // handled: libtiff's global handler is not called
}

static int warning_handler(TIFF *tiff, void *user_data, const char *module, const char *format, va_list arguments) {
    (void)tiff;
    (void)user_data;
    (void)module;
    (void)format;
    (void)arguments;
    return 1;
}

TIFF *strata_tiff_open(const void *bytes, size_t count, size_t max_single_allocation, char *error,
                       size_t error_capacity) {
    if (error_capacity > 0) {
        error[0] = '\0';
    }
    struct source *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(error, error_capacity, "cannot allocate the TIFF reader");
        return NULL;
    }
    s->bytes = bytes;
    s->count = count;
    TIFFOpenOptions *options = TIFFOpenOptionsAlloc();
    if (options == NULL) {
        free(s);
        snprintf(error, error_capacity, "cannot allocate libtiff's options");
        return NULL;
    }
    TIFFOpenOptionsSetErrorHandlerExtR(options, error_handler, s);
    TIFFOpenOptionsSetWarningHandlerExtR(options, warning_handler, s);
    if (max_single_allocation > 0) {
        TIFFOpenOptionsSetMaxSingleMemAlloc(options, (tmsize_t)max_single_allocation);
    }
    TIFF *tiff = TIFFClientOpenExt("memory", "r", s, read_proc, write_proc, seek_proc, close_proc, size_proc,
                                   map_proc, unmap_proc, options);
    TIFFOpenOptionsFree(options);
    if (tiff == NULL) {
        // libtiff closes the handle (close_proc frees `s`) only once the file is open.
        snprintf(error, error_capacity, "%s", s->error[0] ? s->error : "not a TIFF file libtiff can read");
        free(s);
        return NULL;
    }
    return tiff;
}

const char *strata_tiff_error(TIFF *tiff) { return ((struct source *)TIFFClientdata(tiff))->error; }

void strata_tiff_clear_error(TIFF *tiff) { ((struct source *)TIFFClientdata(tiff))->error[0] = '\0'; }

int strata_tiff_features(TIFF *tiff, struct strata_tiff_features *f, char *error, size_t error_capacity) {
    memset(f, 0, sizeof *f);
    char message[1024] = "";
    TIFFRGBAImage image;
    if (!TIFFRGBAImageOK(tiff, message) || !TIFFRGBAImageBegin(&image, tiff, 1, message)) {
        const char *reason = strata_tiff_error(tiff)[0] ? strata_tiff_error(tiff) : message;
        snprintf(error, error_capacity, "%s", reason[0] ? reason : "libtiff cannot read this image as RGBA");
        return -1;
    }
    f->width = image.width;
    f->height = image.height;
    f->orientation = image.orientation;
    f->photometric = image.photometric;
    f->samples_per_pixel = image.samplesperpixel;
    f->bits_per_sample = image.bitspersample;
    f->has_alpha = image.alpha != 0;
    TIFFRGBAImageEnd(&image);
    f->is_tiled = TIFFIsTiled(tiff);
    uint32_t rows = 0;
    if (f->is_tiled) {
        if (!TIFFGetField(tiff, TIFFTAG_TILELENGTH, &rows)) {
            rows = 0;
        }
    } else if (!TIFFGetFieldDefaulted(tiff, TIFFTAG_ROWSPERSTRIP, &rows)) {
        rows = 0;
    }
    f->band_rows = rows == 0 || rows > f->height ? f->height : rows;
    uint32_t count = 0;
    void *profile = NULL;
    if (TIFFGetField(tiff, TIFFTAG_ICCPROFILE, &count, &profile) && profile != NULL) {
        f->icc_count = count;
        f->icc = profile;
    }
    return 0;
}

// The `width` × `height` region at `x`, `y` of the current directory through libtiff's RGBA
// reader (which checks that it can convert the image), rows as stored: the caller applies the
// orientation (libtiff only flips, never transposes).
static int read_region(TIFF *tiff, uint32_t *raster, uint32_t x, uint32_t y, uint32_t width, uint32_t height,
                       char *error, size_t error_capacity) {
    char message[1024] = "";
    TIFFRGBAImage image;
    if (!TIFFRGBAImageBegin(&image, tiff, 1, message)) {
        const char *reason = strata_tiff_error(tiff)[0] ? strata_tiff_error(tiff) : message;
        snprintf(error, error_capacity, "%s", reason[0] ? reason : "libtiff cannot read this image as RGBA");
        return -1;
    }
    int ok = 0;
    if (x < image.width && y < image.height && width <= image.width - x && height <= image.height - y) {
        image.req_orientation = image.orientation;
        image.row_offset = (int)y;
        image.col_offset = (int)x;
        ok = TIFFRGBAImageGet(&image, raster, width, height);
    } else {
        snprintf(message, sizeof message, "the region %ux%u at %u,%u is outside the %ux%u image", width, height, x, y,
                 image.width, image.height);
    }
    TIFFRGBAImageEnd(&image);
    if (!ok) {
        const char *reason = strata_tiff_error(tiff)[0] ? strata_tiff_error(tiff) : message;
        snprintf(error, error_capacity, "%s", reason[0] ? reason : "libtiff could not decode the image");
        return -1;
    }
    return 0;
}

int strata_tiff_read_rows(TIFF *tiff, uint32_t *raster, uint32_t first_row, uint32_t rows, char *error,
                          size_t error_capacity) {
    strata_tiff_clear_error(tiff);
    uint32_t width = 0;
    TIFFGetField(tiff, TIFFTAG_IMAGEWIDTH, &width);
    return read_region(tiff, raster, 0, first_row, width, rows, error, error_capacity);
}

void strata_tiff_rows_extent(TIFF *tiff, uint32_t first_row, uint32_t rows, uint64_t *start, uint64_t *end) {
    *start = 0;
    *end = 0;
    uint32_t width = 0, height = 0, block = 0, across = 1;
    TIFFGetField(tiff, TIFFTAG_IMAGEWIDTH, &width);
    TIFFGetField(tiff, TIFFTAG_IMAGELENGTH, &height);
    int tiled = TIFFIsTiled(tiff);
    if (tiled) {
        uint32_t tile_width = 0;
        if (!TIFFGetField(tiff, TIFFTAG_TILELENGTH, &block) || !TIFFGetField(tiff, TIFFTAG_TILEWIDTH, &tile_width) ||
            tile_width == 0) {
            return;
        }
        across = (width + tile_width - 1) / tile_width;
    } else if (!TIFFGetFieldDefaulted(tiff, TIFFTAG_ROWSPERSTRIP, &block)) {
        return;
    }
    if (block == 0 || height == 0 || across == 0) {
        return;
    }
    if (block > height) {
        block = height;
    }
    uint64_t *offsets = NULL, *counts = NULL;
    if (!TIFFGetField(tiff, tiled ? TIFFTAG_TILEOFFSETS : TIFFTAG_STRIPOFFSETS, &offsets) ||
        !TIFFGetField(tiff, tiled ? TIFFTAG_TILEBYTECOUNTS : TIFFTAG_STRIPBYTECOUNTS, &counts) || !offsets || !counts) {
        return;
    }
    uint64_t per_plane = (uint64_t)((height + block - 1) / block) * across;
    uint32_t blocks = tiled ? TIFFNumberOfTiles(tiff) : TIFFNumberOfStrips(tiff);
    uint64_t low = UINT64_MAX, high = 0, taken = 0, last = (uint64_t)first_row + rows;
    for (uint32_t i = 0; i < blocks; i++) {
        uint64_t top = ((i % per_plane) / across) * (uint64_t)block;
        uint64_t bottom = top + block < height ? top + block : height;
        if (top < first_row || bottom > last || counts[i] == 0) {
            continue;
        }
        low = offsets[i] < low ? offsets[i] : low;
        high = offsets[i] + counts[i] > high ? offsets[i] + counts[i] : high;
        taken += counts[i];
    }
    if (high > low && high - low <= 2 * taken) {
        *start = low;
        *end = high;
    }
}

// One image of the file (directory at `offset`) made current, unless it is already.
static int select_directory(TIFF *tiff, uint64_t offset) {
    if (TIFFCurrentDirOffset(tiff) == offset) {
        return 1;
    }
    return TIFFSetSubDirectory(tiff, offset);
}

static void record_level(TIFF *tiff, struct strata_tiff_level *level) {
    uint32_t width = 0, height = 0;
    TIFFGetField(tiff, TIFFTAG_IMAGEWIDTH, &width);
    TIFFGetField(tiff, TIFFTAG_IMAGELENGTH, &height);
    level->width = width;
    level->height = height;
    level->offset = TIFFCurrentDirOffset(tiff);
    level->is_tiled = TIFFIsTiled(tiff);
    uint32_t block_width = width, block_height = 0;
    if (level->is_tiled) {
        if (!TIFFGetField(tiff, TIFFTAG_TILEWIDTH, &block_width) || !TIFFGetField(tiff, TIFFTAG_TILELENGTH, &block_height)) {
            block_width = width;
            block_height = height;
        }
    } else if (!TIFFGetFieldDefaulted(tiff, TIFFTAG_ROWSPERSTRIP, &block_height) || block_height > height) {
        block_height = height;
    }
    level->block_width = block_width;
    level->block_height = block_height;
}

int strata_tiff_levels(TIFF *tiff, struct strata_tiff_level *levels, int capacity) {
    if (capacity <= 0 || !TIFFSetDirectory(tiff, 0)) {
        return 0;
    }
    int count = 0;
    record_level(tiff, &levels[count++]);
    // The first image's SubIFDs (reduced resolutions as `vips tiffsave --subifd` and OME-TIFF
    // write them), copied before another directory replaces the tag's storage.
    uint64_t subifds[64];
    int subifd_count = 0;
    uint16_t n = 0;
    uint64_t *offsets = NULL;
    if (TIFFGetField(tiff, TIFFTAG_SUBIFD, &n, &offsets) && offsets != NULL) {
        for (uint16_t i = 0; i < n && subifd_count < 64; i++) {
            subifds[subifd_count++] = offsets[i];
        }
    }
    // The following pages (reduced resolutions as `vips tiffsave --pyramid` and scanners write
    // them, or the pages of a document).
    while (count < capacity && TIFFReadDirectory(tiff)) {
        record_level(tiff, &levels[count++]);
    }
    for (int i = 0; i < subifd_count && count < capacity; i++) {
        if (TIFFSetSubDirectory(tiff, subifds[i])) {
            record_level(tiff, &levels[count++]);
        }
    }
    strata_tiff_clear_error(tiff);
    TIFFSetDirectory(tiff, 0);
    return count;
}

int strata_tiff_read_region(TIFF *tiff, uint64_t directory, uint32_t *raster, uint32_t x, uint32_t y, uint32_t width,
                            uint32_t height, char *error, size_t error_capacity) {
    strata_tiff_clear_error(tiff);
    if (!select_directory(tiff, directory)) {
        const char *reason = strata_tiff_error(tiff);
        snprintf(error, error_capacity, "%s", reason[0] ? reason : "cannot read the image's directory");
        return -1;
    }
    return read_region(tiff, raster, x, y, width, height, error, error_capacity);
}
