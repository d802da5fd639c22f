#include "CStrataJPEG.h"
#include "strata_jpeg_header_errors.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>

// A baseline JPEG at 1/8 scale, its entropy-coded data decoded on several threads.
//
// At 1/8 scale a block of 8 × 8 pixels becomes one pixel (or 2 × 2 for a chroma block that
// covers twice the luma's extent): its mean, which the block's DC coefficient gives (and, for
// the quadrant means of a subsampled chroma block, the AC coefficients whose basis functions
// do not vanish over a quadrant). So the only real work is Huffman decoding, which is
// sequential: each code starts where the last one ended, and each block's DC is a difference
// from the last. The data is cut into parts; part 0 is decoded from the known state, every
// other part *speculatively*, from a byte boundary taken for the start of an MCU with
// predictors of 0. Huffman codes resynchronise: after a short run of garbage, a speculative
// decoder's MCU starts fall on the true ones, and from then on it decodes exactly what the
// true decode would, except that its DC values are off by a constant per component. The exact
// decoder, having finished the part before, walks on until one of its MCU starts lies on a
// bit position where the speculative decoder started an MCU: from there the speculative
// records are true (their DC shifted by the difference of the predictors). A part that never
// synchronises is decoded by the exact decoder itself, so the result never depends on the
// guess. In a file with restart markers a speculative part starts right after one, where the
// state is known but for the MCU's index.
//
// Positions are counted in bits of entropy-coded *data* (a stuffed 0xFF 0x00 is one data byte,
// a restart marker none), so that two decoders that read the same bits agree on where they
// are.

#define LOOK 9
#define SKIP_LOOK 11
#define EIGHTH_COMPONENTS 3
#define MAX_BLOCKS 10
#define SCAN_FAIL 64  // speculative restarts after bad codes before a part gives up

// Natural (row-major) index of the k-th coefficient in zigzag order, with 16 extra entries of
// 63 for runs that overshoot (as libjpeg's table has: such coefficients land on the last).
static const int natural_order[64 + 16] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13,
    6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31,
    39, 46, 53, 60, 61, 54, 47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

typedef struct {
    uint16_t look[1 << LOOK];  // (length << 8) | symbol for codes of at most LOOK bits; 0: longer
    // For an AC coefficient that is only skipped: (length of the code and its value's bits <<
    // 8) | symbol, where both fit in SKIP_LOOK bits; 0 otherwise.
    uint16_t skip[1 << SKIP_LOOK];
    int32_t maxcode[18];       // the largest code of each length (-1: none)
    int32_t valoffset[17];
    uint8_t huffval[256];
} huff_table;

typedef struct {
    const uint8_t *p;    // the next raw byte
    const uint8_t *end;  // the end of the data
    uint64_t buf;        // bits, most significant first
    int bits;            // how many bits of `buf` are valid
    int marker;          // a marker (or the end of the data) was reached: zeros are fed
    int64_t loaded;      // data bits loaded since the reader's origin (padding zeros included)
    int64_t real_end;    // `loaded` when the marker was reached
} bit_reader;

typedef struct {
    bit_reader r;
    int32_t pred[EIGHTH_COMPONENTS];
    uint32_t restarts_left;  // MCUs before the next restart marker (restart interval only)
    int next_restart;        // the number (0–7) the next restart marker must carry
    int64_t mcu;             // the next MCU's index (relative in a speculative part)
} decode_state;

typedef struct {
    int component;       // index in the frame (0 = Y)
    int dc_table, ac_table;
    int rx, ry;          // output pixels a block covers across and down (1 or 2)
    int h, v;            // blocks in an MCU
    int quant_dc;
    float weights[64][4];  // a dequantised AC coefficient's share of each output pixel's mean
} scan_component;

typedef struct {
    // Records of decoded MCUs.
    uint8_t *records;
    int64_t *positions;  // each record's MCU start (speculative parts; relative to `origin_d`)
    size_t count, capacity;
    const uint8_t *origin;  // where a speculative part starts reading
    int64_t origin_d;       // the absolute data position of `origin` (filled in by the sync)
    const uint8_t *stop;    // a part stops at an MCU start once its reader is past this byte
    decode_state end;       // the state after the last record
    int failed;             // the exact part's error (an MCU_ status), 0 if none
    int used;               // the part has a range this round
} part;

#define MAX_PARTS 64

/// A run of `count` final records of `p` from `first`, the first being MCU `mcu`, whose DC
/// values are off by `offsets`.
typedef struct {
    const part *p;
    size_t first, count;
    int64_t mcu;
    int32_t offsets[EIGHTH_COMPONENTS];
} span;

struct strata_jpeg_eighth {
    const uint8_t *data, *scan_end;
    size_t size;
    uint32_t width, height;  // of the image
    uint32_t out_width, out_height;
    int components;  // in the frame (1 or 3)
    int hmax, vmax;
    int scan_components;
    scan_component comp[EIGHTH_COMPONENTS];  // in scan order
    int blocks_in_mcu;
    int block_component[MAX_BLOCKS];  // scan-order component of each block of an MCU
    uint32_t mcus_per_row, mcu_rows;
    int64_t total_mcus;
    uint32_t restart_interval;
    huff_table tables[8];  // 0–3 DC, 4–7 AC
    size_t record_size;    // bytes of one MCU's record
    size_t part_capacity;  // MCUs a part may decode in a round
    size_t part_bytes;     // raw bytes of data a part covers

    decode_state exact;  // the true state at the next MCU to be made final
    part parts[MAX_PARTS];
    int part_count;
    // The exact decoder's catch-up records while it synchronises.
    part catchup;
    // The runs of records a round made final, in MCU order, for the band's writers.
    span spans[2 * MAX_PARTS + 2];
    int span_count;
    int64_t span_first_mcu, span_mcus;

    // Output band: the BGRA pixels of the MCU rows from `band_row` (each MCU row `vmax`
    // output rows of `mcus_per_row × hmax` pixels); complete rows are handed out from it.
    uint8_t *band;
    size_t band_rows;       // MCU rows the band holds
    uint32_t band_row;      // the first MCU row in the band
    uint32_t handed_rows;   // MCU rows handed out by the last round, dropped by the next
    int64_t final_mcus;     // MCUs made final so far

    char message[JMSG_LENGTH_MAX + 64];
};

// MARK: - Header

/// A decoding table from a DHT's counts and symbols (libjpeg's derivation); 0 when the table is
/// malformed.
static int make_table(huff_table *t, const JHUFF_TBL *source, int is_dc) {
    memset(t, 0, sizeof *t);
    int lookup_codes[256], lengths[256], count = 0;
    int code = 0;
    for (int length = 1; length <= 16; length++) {
        int n = source->bits[length];
        if (count + n > 256) return 0;
        t->valoffset[length] = count - code;
        if (n) {
            for (int i = 0; i < n; i++) {
                lookup_codes[count] = code;
                lengths[count] = length;
                count++;
                code++;
            }
            t->maxcode[length] = code - 1;
        } else {
            t->maxcode[length] = -1;
        }
        if (code >= (1 << length)) return 0;  // the codes overflow their length (libjpeg's check)
        code <<= 1;
    }
    t->maxcode[17] = 0x7FFFFFFF;
    for (int i = 0; i < count; i++) {
        t->huffval[i] = source->huffval[i];
        if (is_dc && source->huffval[i] > 15) return 0;
        if (lengths[i] <= LOOK) {
            int shift = LOOK - lengths[i];
            for (int fill = 0; fill < (1 << shift); fill++) {
                t->look[(lookup_codes[i] << shift) | fill] = (uint16_t)(lengths[i] << 8 | source->huffval[i]);
            }
        }
        int total = lengths[i] + (is_dc ? 0 : (source->huffval[i] & 15));
        if (!is_dc && total <= SKIP_LOOK) {
            int shift = SKIP_LOOK - lengths[i];
            for (int fill = 0; fill < (1 << shift); fill++) {
                t->skip[(lookup_codes[i] << shift) | fill] = (uint16_t)(total << 8 | source->huffval[i]);
            }
        }
    }
    return 1;
}

/// The mean over output pixel `k` (of `r` across a block) of the 1-D DCT basis function `u`,
/// with the normalisation that makes a block's mean its DC coefficient over 8.
static double basis_mean(int u, int k, int r) {
    double sum = 0, scale = u == 0 ? 1 / sqrt(2.0) : 1;
    int span = 8 / r;
    for (int x = k * span; x < (k + 1) * span; x++) sum += scale / 2 * cos((2 * x + 1) * u * M_PI / 16);
    return sum / span;
}

int strata_jpeg_eighth_open(
    const uint8_t *data, size_t size, strata_jpeg_eighth **out, uint32_t *width, uint32_t *height, char *message) {
    *out = NULL;
    message[0] = 0;
    struct jpeg_decompress_struct info;
    strata_jpeg_header_errors errors;
    strata_jpeg_header_errors_install(&info, &errors, message, 1);  // as the row decoder's
    strata_jpeg_eighth *d = NULL;
    if (setjmp(errors.landing)) {
        jpeg_destroy_decompress(&info);
        free(d);
        return -1;
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, data, (unsigned long)size);
    jpeg_read_header(&info, TRUE);
    int eligible = !info.progressive_mode && !info.arith_code && info.data_precision == 8 &&
                   ((info.num_components == 3 && info.jpeg_color_space == JCS_YCbCr) ||
                    (info.num_components == 1 && info.jpeg_color_space == JCS_GRAYSCALE)) &&
                   info.comps_in_scan == info.num_components && info.Ss == 0 && info.Se == 63 && info.Ah == 0 &&
                   info.Al == 0 && info.image_width > 0 && info.image_height > 0;
    int hmax = 1, vmax = 1;
    if (eligible) {
        for (int i = 0; i < info.num_components; i++) {
            jpeg_component_info *c = &info.comp_info[i];
            if (c->h_samp_factor > hmax) hmax = c->h_samp_factor;
            if (c->v_samp_factor > vmax) vmax = c->v_samp_factor;
        }
        if (info.num_components == 1) hmax = vmax = 1;  // a one-component scan's MCU is one block
        if (hmax > 2 || vmax > 2) eligible = 0;
    }
    if (!eligible) {
        jpeg_destroy_decompress(&info);
        return 0;
    }
    d = calloc(1, sizeof *d);
    if (!d) {
        jpeg_destroy_decompress(&info);
        snprintf(message, JMSG_LENGTH_MAX, "out of memory");
        return -1;
    }
    d->data = data;
    d->size = size;
    d->width = info.image_width;
    d->height = info.image_height;
    d->out_width = (info.image_width + 7) / 8;
    d->out_height = (info.image_height + 7) / 8;
    d->components = info.num_components;
    d->hmax = hmax;
    d->vmax = vmax;
    d->scan_components = info.comps_in_scan;
    d->restart_interval = info.restart_interval;
    d->mcus_per_row = (info.image_width + 8 * hmax - 1) / (8 * hmax);
    d->mcu_rows = (info.image_height + 8 * vmax - 1) / (8 * vmax);
    d->total_mcus = (int64_t)d->mcus_per_row * d->mcu_rows;
    int used_tables[8] = {0};
    int blocks = 0;
    size_t record = sizeof(int32_t) * EIGHTH_COMPONENTS;
    for (int s = 0; s < info.comps_in_scan; s++) {
        jpeg_component_info *c = info.cur_comp_info[s];
        scan_component *sc = &d->comp[s];
        sc->component = c->component_index;
        int h = info.num_components == 1 ? 1 : c->h_samp_factor, v = info.num_components == 1 ? 1 : c->v_samp_factor;
        if (hmax % h || vmax % v || c->dc_tbl_no > 3 || c->ac_tbl_no > 3 || c->quant_tbl_no > 3) eligible = 0;
        JQUANT_TBL *q = info.quant_tbl_ptrs[c->quant_tbl_no];
        JHUFF_TBL *dc = info.dc_huff_tbl_ptrs[c->dc_tbl_no], *ac = info.ac_huff_tbl_ptrs[c->ac_tbl_no];
        if (!q || !dc || !ac) eligible = 0;
        if (!eligible) break;
        sc->h = h;
        sc->v = v;
        sc->rx = hmax / h;
        sc->ry = vmax / v;
        sc->dc_table = c->dc_tbl_no;
        sc->ac_table = 4 + c->ac_tbl_no;
        sc->quant_dc = q->quantval[0];
        for (int n = 0; n < 64; n++) {
            int u = n % 8, vv = n / 8;
            for (int ky = 0; ky < sc->ry; ky++) {
                for (int kx = 0; kx < sc->rx; kx++) {
                    double w = (n == 0 || (sc->rx == 1 && sc->ry == 1))
                                   ? 0
                                   : basis_mean(u, kx, sc->rx) * basis_mean(vv, ky, sc->ry) * q->quantval[n];
                    sc->weights[n][ky * sc->rx + kx] = (float)w;
                }
            }
        }
        if (!used_tables[sc->dc_table]) {
            if (!make_table(&d->tables[sc->dc_table], dc, 1)) eligible = 0;
            used_tables[sc->dc_table] = 1;
        }
        if (!used_tables[sc->ac_table]) {
            if (!make_table(&d->tables[sc->ac_table], ac, 0)) eligible = 0;
            used_tables[sc->ac_table] = 1;
        }
        for (int b = 0; b < h * v && blocks < MAX_BLOCKS; b++) d->block_component[blocks++] = s;
        if (h * v > MAX_BLOCKS) eligible = 0;
        record += (size_t)h * v * (sizeof(int32_t) + (sc->rx * sc->ry > 1 ? 4 * sizeof(float) : 0));
    }
    if (blocks > MAX_BLOCKS) eligible = 0;
    if (!eligible) {
        jpeg_destroy_decompress(&info);
        free(d);
        return 0;
    }
    d->blocks_in_mcu = blocks;
    d->record_size = (record + 7) & ~(size_t)7;
    // The entropy-coded data starts where libjpeg's marker reader stopped, after the SOS.
    const uint8_t *scan = info.src->next_input_byte;
    jpeg_destroy_decompress(&info);
    d->scan_end = data + size;
    d->exact.r.p = scan;
    d->exact.r.end = data + size;
    d->exact.restarts_left = d->restart_interval;
    d->part_bytes = 1 << 20;
    d->part_capacity = 1 << 16;
    d->band_row = 0;
    *out = d;
    *width = d->out_width;
    *height = d->out_height;
    return 1;
}

static void free_part(part *p) {
    free(p->records);
    free(p->positions);
}

void strata_jpeg_eighth_close(strata_jpeg_eighth *d) {
    if (!d) return;
    for (int i = 0; i < MAX_PARTS; i++) free_part(&d->parts[i]);
    free_part(&d->catchup);
    free(d->band);
    free(d);
}

const char *strata_jpeg_eighth_message(const strata_jpeg_eighth *d) { return d->message; }

size_t strata_jpeg_eighth_consumed(const strata_jpeg_eighth *d) {
    // The bit reader loads up to 8 bytes ahead of the bits it has used.
    size_t at = (size_t)(d->exact.r.p - d->data);
    return at > 8 ? at - 8 : 0;
}

void strata_jpeg_eighth_set_part_bytes(strata_jpeg_eighth *d, size_t bytes) { d->part_bytes = bytes < 64 ? 64 : bytes; }

// MARK: - Bits

static inline uint64_t load_be64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

/// Whether any byte of `w` is 0xFF.
static inline int has_ff(uint64_t w) {
    uint64_t inverted = ~w;
    return ((inverted - 0x0101010101010101ull) & ~inverted & 0x8080808080808080ull) != 0;
}

/// Loads bytes until more than 56 bits are held (libjpeg's rules: 0xFF 0xFF… 0x00 is one data
/// byte 0xFF; 0xFF followed by anything else is a marker, where zeros are fed from then on).
static inline void fill(bit_reader *r) {
    if (r->bits > 56) return;
    if (!r->marker && r->end - r->p >= 8) {
        uint64_t w = load_be64(r->p);
        if (!has_ff(w)) {
            int n = (64 - r->bits) >> 3;
            uint64_t add = n == 8 ? w : (w >> (64 - 8 * n)) << (64 - 8 * n);
            r->buf |= add >> r->bits;
            r->bits += 8 * n;
            r->p += n;
            r->loaded += 8 * n;
            return;
        }
    }
    while (r->bits <= 56) {
        unsigned c = 0;
        if (!r->marker) {
            if (r->p >= r->end) {
                r->marker = 1;
                r->real_end = r->loaded;
            } else if (*r->p != 0xFF) {
                c = *r->p++;
            } else {
                const uint8_t *q = r->p + 1;
                while (q < r->end && *q == 0xFF) q++;
                if (q < r->end && *q == 0) {
                    r->p = q + 1;
                    c = 0xFF;
                } else {
                    r->marker = 1;  // `p` stays at the marker's first 0xFF
                    r->real_end = r->loaded;
                }
            }
        }
        r->buf |= (uint64_t)c << (56 - r->bits);
        r->bits += 8;
        r->loaded += 8;
    }
}

static inline int64_t position(const bit_reader *r) { return r->loaded - r->bits; }

/// The next Huffman symbol, or -1 for a code the table does not have. Needs 16 bits held.
static inline int decode_symbol(bit_reader *r, const huff_table *t) {
    unsigned e = t->look[r->buf >> (64 - LOOK)];
    if (e) {
        int length = e >> 8;
        r->buf <<= length;
        r->bits -= length;
        return e & 0xFF;
    }
    int length = LOOK + 1;
    int32_t code = (int32_t)(r->buf >> (64 - length));
    while (code > t->maxcode[length]) {
        length++;
        if (length > 16) return -1;
        code = (int32_t)(r->buf >> (64 - length));
    }
    r->buf <<= length;
    r->bits -= length;
    return t->huffval[code + t->valoffset[length]];
}

/// `s` bits (1–16) as a signed value (JPEG's EXTEND).
static inline int32_t take_signed(bit_reader *r, int s) {
    uint32_t v = (uint32_t)(r->buf >> (64 - s));
    r->buf <<= s;
    r->bits -= s;
    return v < (1u << (s - 1)) ? (int32_t)v - (int32_t)(1u << s) + 1 : (int32_t)v;
}

static inline void skip_bits(bit_reader *r, int s) {
    r->buf <<= s;
    r->bits -= s;
}

// MARK: - MCUs

enum { MCU_OK = 0, MCU_BAD_CODE = 1, MCU_PAST_DATA = 2, MCU_BAD_RESTART = 3, MCU_NO_RESTART_AFTER = 4, MCU_NO_MEMORY = 5 };

/// Handles the restart marker due before the next MCU: the rest of the byte is dropped, the
/// marker must come next with the expected number, and the predictors start again from 0.
static int restart(strata_jpeg_eighth *d, decode_state *s) {
    bit_reader *r = &s->r;
    if (!r->marker) fill(r);
    // Only the last byte's padding bits may be left before the marker.
    if (!r->marker || r->real_end - position(r) >= 8) return MCU_BAD_RESTART;
    const uint8_t *q = r->p;
    while (q < r->end && *q == 0xFF) q++;
    if (q >= r->end || *q != 0xD0 + s->next_restart) return MCU_BAD_RESTART;
    r->p = q + 1;
    r->buf = 0;
    r->bits = 0;
    r->marker = 0;
    r->loaded = r->real_end;
    for (int c = 0; c < EIGHTH_COMPONENTS; c++) s->pred[c] = 0;
    s->restarts_left = d->restart_interval;
    s->next_restart = (s->next_restart + 1) & 7;
    return MCU_OK;
}

/// Decodes one MCU into `record` (the predictors before it, then each block's DC and, for a
/// block that covers more than one output pixel, its AC shares). A restart marker due after
/// it is read at once (unless the exact decoder has made the image's last MCU), so that the
/// state at every MCU start is the one after the marker, as a speculative part that starts
/// after a marker has it; `MCU_NO_RESTART_AFTER` says the MCU was decoded but the marker
/// after it is missing.
static int decode_mcu(strata_jpeg_eighth *d, decode_state *s, uint8_t *record, int exact) {
    if (d->restart_interval && s->restarts_left == 0) {
        int status = restart(d, s);  // one left pending by MCU_NO_RESTART_AFTER
        if (status) return status;
    }
    bit_reader *r = &s->r;
    int32_t *preds = (int32_t *)record;
    for (int c = 0; c < EIGHTH_COMPONENTS; c++) preds[c] = s->pred[c];
    uint8_t *out = record + sizeof(int32_t) * EIGHTH_COMPONENTS;
    for (int b = 0; b < d->blocks_in_mcu; b++) {
        const scan_component *sc = &d->comp[d->block_component[b]];
        const huff_table *dc = &d->tables[sc->dc_table], *ac = &d->tables[sc->ac_table];
        if (r->bits < 32) fill(r);
        int sym = decode_symbol(r, dc);
        if (sym < 0) return MCU_BAD_CODE;
        int32_t diff = sym ? take_signed(r, sym) : 0;
        int ci = d->block_component[b];
        s->pred[ci] = (int32_t)((uint32_t)s->pred[ci] + (uint32_t)diff);
        memcpy(out, &s->pred[ci], sizeof(int32_t));
        out += sizeof(int32_t);
        if (sc->rx * sc->ry > 1) {
            float acc[4] = {0, 0, 0, 0};
            for (int k = 1; k < 64; k++) {
                if (r->bits < 32) fill(r);
                int rs = decode_symbol(r, ac);
                if (rs < 0) return MCU_BAD_CODE;
                int run = rs >> 4, size = rs & 15;
                if (size) {
                    k += run;
                    float value = (float)take_signed(r, size);
                    const float *w = sc->weights[natural_order[k]];
                    acc[0] += value * w[0];
                    acc[1] += value * w[1];
                    acc[2] += value * w[2];
                    acc[3] += value * w[3];
                } else {
                    if (run != 15) break;
                    k += 15;
                }
            }
            memcpy(out, acc, sizeof acc);
            out += sizeof acc;
        } else {
            for (int k = 1; k < 64; k++) {
                if (r->bits < 32) fill(r);
                unsigned e = ac->skip[r->buf >> (64 - SKIP_LOOK)];
                int rs;
                if (e) {
                    skip_bits(r, (int)(e >> 8));  // the code and the value's bits at once
                    rs = e & 0xFF;
                    if (rs & 15) {
                        k += rs >> 4;
                        continue;
                    }
                } else {
                    rs = decode_symbol(r, ac);
                    if (rs < 0) return MCU_BAD_CODE;
                    if (rs & 15) {
                        k += rs >> 4;
                        skip_bits(r, rs & 15);
                        continue;
                    }
                }
                if (rs >> 4 != 15) break;  // end of block
                k += 15;
            }
        }
    }
    if (r->marker && position(r) > r->real_end) return MCU_PAST_DATA;
    s->mcu++;
    if (d->restart_interval && --s->restarts_left == 0 && !(exact && s->mcu >= d->total_mcus)) {
        if (restart(d, s)) return MCU_NO_RESTART_AFTER;
    }
    return MCU_OK;
}

static int reserve(part *p, size_t record_size, int with_positions) {
    if (p->count < p->capacity) return 1;
    size_t capacity = p->capacity ? p->capacity * 2 : 1024;
    uint8_t *records = realloc(p->records, capacity * record_size);
    if (!records) return 0;
    p->records = records;
    if (with_positions) {
        int64_t *positions = realloc(p->positions, capacity * sizeof(int64_t));
        if (!positions) return 0;
        p->positions = positions;
    }
    p->capacity = capacity;
    return 1;
}

/// The number of data bytes in `[from, to)` (both at byte boundaries of the data), and whether
/// a marker other than a restart marker lies before `to` (then the count stops there).
static int64_t data_bytes(const uint8_t *from, const uint8_t *to, const uint8_t *end) {
    int64_t n = 0;
    const uint8_t *p = from;
    while (p < to) {
        const uint8_t *ff = memchr(p, 0xFF, (size_t)(to - p));
        if (!ff) return n + (to - p);
        n += ff - p;
        const uint8_t *q = ff + 1;
        while (q < end && *q == 0xFF) q++;
        if (q >= end) return n;
        if (*q == 0) {
            n += 1;
        } else if (*q < 0xD0 || *q > 0xD7) {
            return n;
        }
        p = q + 1;
    }
    return n;
}

/// A byte boundary of the data at or after `p` (not inside a 0xFF sequence), or, in a file
/// with restart markers, the byte after the next restart marker (`*restart_number` its
/// number); NULL when there is none before the end.
static const uint8_t *part_origin(strata_jpeg_eighth *d, const uint8_t *p, int *restart_number) {
    const uint8_t *end = d->scan_end;
    if (d->restart_interval == 0) {
        while (p < end && p[-1] == 0xFF) p++;
        return p < end - 1 ? p : NULL;
    }
    while (p < end) {
        const uint8_t *ff = memchr(p, 0xFF, (size_t)(end - p));
        if (!ff) return NULL;
        const uint8_t *q = ff + 1;
        while (q < end && *q == 0xFF) q++;
        if (q >= end) return NULL;
        if (*q >= 0xD0 && *q <= 0xD7) {
            *restart_number = *q - 0xD0;
            return q + 1 < end ? q + 1 : NULL;
        }
        if (*q != 0) return NULL;  // another marker: the scan ends
        p = q + 1;
    }
    return NULL;
}

static void start_speculation(strata_jpeg_eighth *d, part *p, const uint8_t *origin, int restart_number) {
    memset(&p->end, 0, sizeof p->end);
    p->end.r.p = origin;
    p->end.r.end = d->scan_end;
    p->end.restarts_left = d->restart_interval;
    p->end.next_restart = (restart_number + 1) & 7;
    p->origin = origin;
    p->count = 0;
}

int strata_jpeg_eighth_plan(strata_jpeg_eighth *d, int parts, int *speculative) {
    *speculative = 0;
    if (parts < 1) parts = 1;
    if (parts > MAX_PARTS) parts = MAX_PARTS;
    d->part_count = parts;
    const uint8_t *from = d->exact.r.p;
    for (int i = 0; i < parts; i++) {
        part *p = &d->parts[i];
        p->count = 0;
        p->failed = 0;
        p->used = 0;
        const uint8_t *stop = from + (size_t)(i + 1) * d->part_bytes;
        p->stop = stop < d->scan_end ? stop : d->scan_end;
        if (i == 0) {
            p->used = d->exact.mcu < d->total_mcus;
            continue;
        }
        if (d->exact.r.marker || d->exact.mcu >= d->total_mcus) continue;
        int restart_number = 0;
        const uint8_t *origin = part_origin(d, from + (size_t)i * d->part_bytes, &restart_number);
        if (!origin || origin >= p->stop) continue;
        start_speculation(d, p, origin, restart_number);
        p->used = 1;
        ++*speculative;
    }
    return d->part_count;
}

/// Decodes the next MCU from the true state `s` into a record appended to `into` (part 0's or
/// the catch-up's). A restart marker missing after it is an error here: the image goes on.
static int append_exact(strata_jpeg_eighth *d, part *into, decode_state *s) {
    if (!reserve(into, d->record_size, 0)) return MCU_NO_MEMORY;
    int status = decode_mcu(d, s, into->records + into->count * d->record_size, 1);
    if (status) return status == MCU_NO_RESTART_AFTER ? MCU_BAD_RESTART : status;
    into->count++;
    return MCU_OK;
}

int strata_jpeg_eighth_decode_part(strata_jpeg_eighth *d, int index) {
    part *p = &d->parts[index];
    if (!p->used) return 0;
    if (index == 0) {
        // The exact part: from the true state, up to its stop, as far as the image goes.
        p->end = d->exact;
        while (p->end.mcu < d->total_mcus && p->count < d->part_capacity && p->end.r.p < p->stop) {
            int status = append_exact(d, p, &p->end);
            if (status) {
                p->failed = status;
                return -1;
            }
        }
        return 0;
    }
    // A speculative part: every MCU start is recorded; a bad code starts it again after it.
    // One that gives up keeps no records (the true decode then covers its range).
    int restarts = 0;
    while (p->count < d->part_capacity && p->end.r.p < p->stop) {
        if (!reserve(p, d->record_size, 1)) break;  // the records so far stand
        decode_state before = p->end;
        int64_t at = position(&p->end.r);
        int status = decode_mcu(d, &p->end, p->records + p->count * d->record_size, 0);
        if (status == MCU_OK) {
            p->positions[p->count++] = at;
            continue;
        }
        if (status == MCU_NO_RESTART_AFTER) {
            p->positions[p->count++] = at;  // the scan may end here (or the data is broken)
            break;
        }
        if (status == MCU_PAST_DATA) {
            p->end = before;  // the data ends here
            break;
        }
        // Started again at the next byte boundary (after a restart marker in a file that has
        // them), its data position carried on; not past a marker or the part's end.
        if (++restarts > SCAN_FAIL || p->end.r.marker) {
            p->count = 0;
            return 0;
        }
        const uint8_t *next = p->end.r.p;
        int64_t loaded = p->end.r.loaded;  // the data position of `next`
        int restart_number = 0;
        if (d->restart_interval) {
            const uint8_t *after = part_origin(d, next, &restart_number);
            if (after) loaded += 8 * data_bytes(next, after, d->scan_end);
            next = after;
        }
        if (!next || next >= p->stop) {
            p->count = 0;
            return 0;
        }
        start_speculation(d, p, p->origin, restart_number);
        p->end.r.p = next;
        p->end.r.loaded = loaded;
    }
    return 0;
}

// MARK: - Synchronisation and output

/// The absolute data position (bits) of byte boundary `q`, from the exact reader's.
static int64_t absolute(const bit_reader *r, const uint8_t *q, const uint8_t *end) {
    int64_t here = r->marker ? r->real_end : r->loaded;  // the data position of `r->p`
    if (q >= r->p) return here + 8 * data_bytes(r->p, q, end);
    return here - 8 * data_bytes(q, r->p, end);
}

static inline uint8_t clamp_byte(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

/// Makes room in the band for the MCUs up to `end` (exclusive).
static int reserve_band(strata_jpeg_eighth *d, int64_t end) {
    if (end <= 0) return 0;
    size_t rows_needed = (size_t)((end - 1) / d->mcus_per_row) - d->band_row + 1;
    size_t mcu_row_bytes = (size_t)d->mcus_per_row * d->hmax * 4 * d->vmax;
    if (rows_needed <= d->band_rows) return 0;
    size_t rows = d->band_rows ? d->band_rows : 4;
    while (rows < rows_needed) rows *= 2;
    uint8_t *band = realloc(d->band, rows * mcu_row_bytes);
    if (!band) return -1;
    d->band = band;
    d->band_rows = rows;
    return 0;
}

/// Writes `count` records of `p` from `first`, the first being MCU `mcu`, with `offsets`
/// added to their DC values, into the band (room made) as BGRA (libjpeg's YCbCr → RGB
/// arithmetic). Writes only those MCUs' pixels: runs may be written on several threads.
static void write_mcus(const strata_jpeg_eighth *d, const part *p, size_t first, size_t count, int64_t mcu, const int32_t *offsets) {
    if (count == 0) return;
    size_t row_bytes = (size_t)d->mcus_per_row * d->hmax * 4;  // one output row
    size_t mcu_row_bytes = row_bytes * d->vmax;
    const int hmax = d->hmax, vmax = d->vmax, blocks = d->blocks_in_mcu, gray = d->components == 1;
    const size_t record_size = d->record_size;
    const uint32_t per_row = d->mcus_per_row;
    uint32_t mx = (uint32_t)(mcu % per_row), my = (uint32_t)(mcu / per_row);
    for (size_t i = 0; i < count; i++, mx++) {
        if (mx == per_row) {
            mx = 0;
            my++;
        }
        const uint8_t *record = p->records + (first + i) * record_size + sizeof(int32_t) * EIGHTH_COMPONENTS;
        // Y, Cb, Cr of the MCU's output pixels (at most 2 × 2), row-major.
        uint8_t ycc[4][3] = {{0, 128, 128}, {0, 128, 128}, {0, 128, 128}, {0, 128, 128}};
        for (int b = 0; b < blocks;) {
            int s = d->block_component[b];
            const scan_component *sc = &d->comp[s];
            int channel = gray ? 0 : sc->component;
            for (int by = 0; by < sc->v; by++) {
                for (int bx = 0; bx < sc->h; bx++, b++) {
                    int32_t dc;
                    memcpy(&dc, record, sizeof dc);
                    record += sizeof dc;
                    // libjpeg keeps a coefficient in 16 bits.
                    int32_t coefficient = (int16_t)(uint16_t)((uint32_t)dc + (uint32_t)offsets[s]);
                    int32_t mean = coefficient * sc->quant_dc;
                    if (sc->rx * sc->ry == 1) {
                        ycc[by * hmax + bx][channel] = clamp_byte(((mean + 4) >> 3) + 128);  // libjpeg's 1 × 1 IDCT
                    } else {
                        float acc[4];
                        memcpy(acc, record, sizeof acc);
                        record += sizeof acc;
                        for (int ky = 0; ky < sc->ry; ky++) {
                            for (int kx = 0; kx < sc->rx; kx++) {
                                float value = (float)mean / 8 + acc[ky * sc->rx + kx] + 128.5f;
                                int v = value <= 0 ? 0 : value >= 255 ? 255 : (int)value;
                                ycc[(by * sc->ry + ky) * hmax + bx * sc->rx + kx][channel] = (uint8_t)v;
                            }
                        }
                    }
                }
            }
        }
        uint8_t *origin = d->band + (size_t)(my - d->band_row) * mcu_row_bytes + (size_t)mx * hmax * 4;
        for (int y = 0; y < vmax; y++) {
            uint8_t *bgra = origin + (size_t)y * row_bytes;
            for (int x = 0; x < hmax; x++, bgra += 4) {
                const uint8_t *c = ycc[y * hmax + x];
                int luma = c[0];
                if (gray) {
                    bgra[0] = bgra[1] = bgra[2] = (uint8_t)luma;
                } else {
                    int cb = c[1] - 128, cr = c[2] - 128;
                    bgra[0] = clamp_byte(luma + ((116130 * cb + 32768) >> 16));
                    bgra[1] = clamp_byte(luma + ((-22554 * cb - 46802 * cr + 32768) >> 16));
                    bgra[2] = clamp_byte(luma + ((91881 * cr + 32768) >> 16));
                }
                bgra[3] = 255;
            }
        }
    }
}

/// Appends MCUs decoded by the exact decoder during a synchronisation to the catch-up part.
static int fail(strata_jpeg_eighth *d, int status) {
    if (status == MCU_NO_MEMORY) {
        snprintf(d->message, sizeof d->message, "out of memory for the 1/8-scale decode's records (MCU %lld of %lld)",
                 (long long)d->exact.mcu, (long long)d->total_mcus);
        return -1;
    }
    const char *why = status == MCU_BAD_CODE    ? "a Huffman code the tables do not have"
                      : status == MCU_PAST_DATA ? "the data ends before the last MCU"
                                                : "a missing or misnumbered restart marker";
    snprintf(d->message, sizeof d->message, "Corrupt JPEG data: %s (MCU %lld of %lld)", why,
             (long long)d->exact.mcu, (long long)d->total_mcus);
    return -1;
}

/// Adds a run of final records to the round's spans.
static void add_span(strata_jpeg_eighth *d, const part *p, size_t first, size_t count, int64_t mcu, const int32_t *offsets) {
    if (count == 0) return;
    span *s = &d->spans[d->span_count++];
    s->p = p;
    s->first = first;
    s->count = count;
    s->mcu = mcu;
    for (int c = 0; c < EIGHTH_COMPONENTS; c++) s->offsets[c] = offsets ? offsets[c] : 0;
    d->span_mcus += (int64_t)count;
}

int strata_jpeg_eighth_finish_round(strata_jpeg_eighth *d, int64_t *synced_parts) {
    size_t mcu_row_bytes = (size_t)d->mcus_per_row * d->hmax * 4 * d->vmax;
    if (d->handed_rows) {
        // The rows handed out last time leave; a partial MCU row after them moves up.
        uint32_t held = (uint32_t)((d->final_mcus + d->mcus_per_row - 1) / d->mcus_per_row) - d->band_row - d->handed_rows;
        if (held) memmove(d->band, d->band + (size_t)d->handed_rows * mcu_row_bytes, held * mcu_row_bytes);
        d->band_row += d->handed_rows;
        d->handed_rows = 0;
    }
    d->span_count = 0;
    d->span_mcus = 0;
    d->span_first_mcu = d->exact.mcu;
    part *p0 = &d->parts[0];
    if (p0->failed) {
        d->exact = p0->end;
        return fail(d, p0->failed);
    }
    int64_t next_mcu = d->exact.mcu;
    add_span(d, p0, 0, p0->count, next_mcu, NULL);
    next_mcu += (int64_t)p0->count;
    d->exact = p0->end;
    part *c = &d->catchup;
    c->count = 0;
    for (int i = 1; i < d->part_count; i++) {
        part *p = &d->parts[i];
        if (d->exact.mcu >= d->total_mcus) break;
        if (!p->used) continue;  // its range is caught up with before the next part
        // This part's records are at positions relative to its origin.
        int64_t origin = absolute(&d->exact.r, p->origin, d->scan_end);
        size_t k = 0, caught = c->count;
        int synced = 0;
        while (d->exact.mcu < d->total_mcus) {
            int64_t at = position(&d->exact.r);
            while (k < p->count && origin + p->positions[k] < at) k++;
            if (k < p->count && origin + p->positions[k] == at) {
                synced = 1;
                break;
            }
            // Past the part's last record (or with none): the exact decoder covers its range.
            if (k >= p->count && d->exact.r.p >= p->stop) break;
            int status = append_exact(d, &d->catchup, &d->exact);
            if (status) return fail(d, status);
        }
        add_span(d, c, caught, c->count - caught, next_mcu, NULL);
        next_mcu += (int64_t)(c->count - caught);
        if (!synced) continue;
        ++*synced_parts;
        const int32_t *snapshot = (const int32_t *)(p->records + k * d->record_size);
        int32_t offsets[EIGHTH_COMPONENTS];
        for (int j = 0; j < EIGHTH_COMPONENTS; j++) offsets[j] = (int32_t)((uint32_t)d->exact.pred[j] - (uint32_t)snapshot[j]);
        size_t n = p->count - k;
        int64_t left = d->total_mcus - d->exact.mcu;
        int complete = (int64_t)n >= left;
        if (complete) n = (size_t)left;
        add_span(d, p, k, n, next_mcu, offsets);
        next_mcu += (int64_t)n;
        if (complete) {
            d->exact.mcu = d->total_mcus;
            break;
        }
        // The part's end state becomes the exact one.
        decode_state end = p->end;
        end.r.loaded += origin;
        if (end.r.marker) end.r.real_end += origin;
        for (int j = 0; j < EIGHTH_COMPONENTS; j++) end.pred[j] = (int32_t)((uint32_t)end.pred[j] + (uint32_t)offsets[j]);
        end.mcu = next_mcu;
        d->exact = end;
    }
    d->exact.mcu = next_mcu < d->exact.mcu ? d->exact.mcu : next_mcu;
    if (reserve_band(d, d->span_first_mcu + d->span_mcus)) return fail(d, MCU_NO_MEMORY);
    return d->exact.mcu >= d->total_mcus ? 0 : 1;
}

void strata_jpeg_eighth_write_slice(strata_jpeg_eighth *d, int index, int slices) {
    // The slice's MCUs, cut evenly from the round's, across spans.
    int64_t from = d->span_mcus * index / slices, to = d->span_mcus * (index + 1) / slices;
    int64_t at = 0;
    for (int i = 0; i < d->span_count && at < to; i++) {
        const span *s = &d->spans[i];
        int64_t start = at, end = at + (int64_t)s->count;
        at = end;
        if (end <= from) continue;
        int64_t a = start > from ? start : from, b = end < to ? end : to;
        write_mcus(d, s->p, s->first + (size_t)(a - start), (size_t)(b - a), s->mcu + (a - start), s->offsets);
    }
}

uint32_t strata_jpeg_eighth_rows(strata_jpeg_eighth *d, const uint8_t **rows, size_t *stride, uint32_t *first_row) {
    d->final_mcus = d->span_first_mcu + d->span_mcus;
    d->span_mcus = 0;
    d->span_count = 0;
    d->span_first_mcu = d->final_mcus;
    // The complete MCU rows (cropped to the output's height), from the band.
    uint32_t complete_rows = (uint32_t)(d->final_mcus / d->mcus_per_row);
    if (d->final_mcus >= d->total_mcus) complete_rows = d->mcu_rows;
    if (complete_rows <= d->band_row) return 0;
    uint32_t out_first = d->band_row * d->vmax;
    uint32_t out_end = complete_rows * d->vmax;
    if (out_end > d->out_height) out_end = d->out_height;
    *rows = d->band;
    *stride = (size_t)d->mcus_per_row * d->hmax * 4;
    *first_row = out_first;
    d->handed_rows = complete_rows - d->band_row;
    return out_end > out_first ? out_end - out_first : 0;
}
