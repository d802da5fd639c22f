#include "CStrataJPEG.h"
#include "strata_jpeg_header_errors.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>

int strata_jpeg_read_icc(const uint8_t *data, size_t size, uint8_t **icc, unsigned int *icc_size, char *message) {
    struct jpeg_decompress_struct info;
    strata_jpeg_header_errors errors;
    *icc = NULL;
    *icc_size = 0;
    message[0] = 0;
    // Warnings while reading a header do not matter here: the decode itself reports them.
    strata_jpeg_header_errors_install(&info, &errors, message, 0);
    if (setjmp(errors.landing)) {
        jpeg_destroy_decompress(&info);
        if (*icc) {
            free(*icc);
            *icc = NULL;
        }
        return -1;
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, data, (unsigned long)size);
    jpeg_save_markers(&info, JPEG_APP0 + 2, 0xFFFF);
    jpeg_read_header(&info, TRUE);
    JOCTET *profile = NULL;
    unsigned int length = 0;
    int found = jpeg_read_icc_profile(&info, &profile, &length) ? 1 : 0;
    *icc = profile;
    *icc_size = length;
    jpeg_destroy_decompress(&info);
    return found;
}

void strata_jpeg_free(void *pointer) { free(pointer); }
