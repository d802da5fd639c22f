#include "CStrataJPEG.h"

#include <string.h>

/// The most scans a progressive image may have (as strata_jpeg_rows.c and TJFLAG_LIMITSCANS).
#define STRATA_JPEG_SPLIT_SCAN_LIMIT 500

static void put(uint8_t *out, size_t *at, const uint8_t *from, size_t count) {
    if (out) memcpy(out + *at, from, count);
    *at += count;
}

/// Where the entropy-coded data that starts at `i` ends: at the first marker that is not a
/// restart marker (0xFF followed by anything but a stuffed 0x00 or RST0–7; fill bytes 0xFF
/// before a marker belong to it). Returns `size` when no marker follows.
static size_t entropy_end(const uint8_t *d, size_t size, size_t i) {
    while (i + 1 < size) {
        const uint8_t *ff = memchr(d + i, 0xFF, size - i - 1);
        if (!ff) return size;
        size_t j = (size_t)(ff - d);
        uint8_t next = d[j + 1];
        if (next == 0x00 || (next >= 0xD0 && next <= 0xD7)) {
            i = j + 2;
            continue;
        }
        return j;
    }
    return size;
}

int strata_jpeg_split(
    const uint8_t *data, size_t size, uint8_t *luma, size_t *luma_size, uint8_t *chroma, size_t *chroma_size) {
    if (size < 4 || data[0] != 0xFF || data[1] != 0xD8) return 0;
    size_t i = 2, lo = 0, co = 0;
    put(luma, &lo, data, 2);
    put(chroma, &co, data, 2);
    int frame = 0, scans = 0, luma_scans = 0, chroma_scans = 0;
    uint8_t ids[3] = {0, 0, 0}, luma_id = 0;
    // Each component's known bits per coefficient, as libjpeg's coef_bits: -1 none yet, else
    // the last scan's Al (0 once complete).
    int8_t bits[3][64];
    memset(bits, -1, sizeof bits);
    while (i < size) {
        if (data[i] != 0xFF) return 0;  // garbage between segments: libjpeg warns; leave it to it
        while (i < size && data[i] == 0xFF) i++;  // fill bytes
        if (i >= size) return 0;
        uint8_t marker = data[i];
        size_t start = i - 1;
        i++;
        if (marker == 0xD9) {  // EOI
            static const uint8_t eoi[2] = {0xFF, 0xD9};
            if (!frame || luma_scans == 0 || chroma_scans == 0) return 0;
            // libjpeg smooths blocks (do_block_smoothing) when coefficients 0–9 of any component
            // are incomplete at the end; the halves decode without smoothing, so only files that
            // complete them all give the same bytes.
            for (int c = 0; c < 3; c++)
                for (int k = 0; k < 10; k++)
                    if (bits[c][k] != 0) return 0;
            put(luma, &lo, eoi, 2);
            put(chroma, &co, eoi, 2);
            if (luma_size) *luma_size = lo;
            if (chroma_size) *chroma_size = co;
            return 1;
        }
        if (i + 2 > size) return 0;
        size_t length = ((size_t)data[i] << 8) | data[i + 1];
        if (length < 2 || i + length > size) return 0;
        const uint8_t *segment = data + i + 2;
        size_t end = i + length;
        if (marker == 0xC2) {  // SOF2: progressive, Huffman
            if (frame || length < 8 + 9) return 0;
            if (segment[0] != 8 || segment[5] != 3) return 0;  // 8-bit, three components
            uint8_t h0 = segment[7] >> 4, v0 = segment[7] & 15;
            for (int k = 1; k < 3; k++) {
                uint8_t h = segment[7 + 3 * k] >> 4, v = segment[7 + 3 * k] & 15;
                if (h > h0 || v > v0) return 0;  // the first component must be the fullest
            }
            for (int k = 0; k < 3; k++) ids[k] = segment[6 + 3 * k];
            if (ids[0] == ids[1] || ids[0] == ids[2] || ids[1] == ids[2]) return 0;
            luma_id = ids[0];
            frame = 1;
            put(luma, &lo, data + start, end - start);
            put(chroma, &co, data + start, end - start);
            i = end;
        } else if (marker == 0xDA) {  // SOS
            if (!frame || length < 2 + 1) return 0;
            uint8_t count = segment[0];
            if (count < 1 || count > 4 || length < 2 + 1 + 2 * (size_t)count + 3) return 0;
            uint8_t first = segment[1 + 2 * count], last = segment[2 + 2 * count];
            uint8_t low = segment[3 + 2 * count] & 15;
            if (first > 63 || last > 63 || first > last || low > 13) return 0;
            for (int k = 0; k < count; k++) {
                int c = segment[1 + 2 * k] == ids[0] ? 0 : segment[1 + 2 * k] == ids[1] ? 1 : segment[1 + 2 * k] == ids[2] ? 2 : -1;
                if (c < 0) return 0;
                for (int coefficient = first; coefficient <= last; coefficient++) bits[c][coefficient] = (int8_t)low;
            }
            if (++scans > STRATA_JPEG_SPLIT_SCAN_LIMIT) return 0;
            size_t scan_end = entropy_end(data, size, end);
            if (scan_end >= size) return 0;  // no marker after the data: truncated
            if (first == 0) {  // a DC scan (first or refinement): both streams need it
                put(luma, &lo, data + start, scan_end - start);
                put(chroma, &co, data + start, scan_end - start);
            } else {  // an AC scan: one component, by the progressive rules
                if (count != 1) return 0;
                if (segment[1] == luma_id) {
                    put(luma, &lo, data + start, scan_end - start);
                    luma_scans++;
                } else {
                    put(chroma, &co, data + start, scan_end - start);
                    chroma_scans++;
                }
            }
            i = scan_end;
        } else if (marker == 0xC4 || marker == 0xDB || marker == 0xDD || (marker >= 0xE0 && marker <= 0xEF)
                   || marker == 0xFE) {
            // Tables, restart interval, application data, comments: both streams, in order.
            put(luma, &lo, data + start, end - start);
            put(chroma, &co, data + start, end - start);
            i = end;
        } else {
            return 0;  // another frame type, DNL, hierarchical markers, a stray RST: not split
        }
    }
    return 0;  // no EOI
}
