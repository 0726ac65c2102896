/* huffman_floor.c - what libjpeg-turbo's entropy (Huffman) decoding alone costs on a set of
 * JPEGs, against full decodes at DCT scales 8/8, 2/8 and 1/8 (the floor under
 * any crop decode of files without restart markers, which must Huffman-decode every MCU down
 * to the crop's bottom row; DALI's CPU decoder and fastq's both use libjpeg-turbo).
 *
 * "Huffman only" is jpeg_skip_scanlines over all rows but the last: libjpeg-turbo then runs
 * decode_mcu with no output block for every iMCU row (no IDCT, upsampling or colour
 * conversion); the last row is left so that the call is not short-cut.  Thread CPU time,
 * files read into memory first, one thread.
 *
 * Build and run (Debian: libjpeg62-turbo-dev):
 *   gcc -O2 -Wall -Wextra benchmarks/huffman_floor.c -ljpeg -o /tmp/huffman_floor
 *   find ~/.cache/fastq/bench_data/hires_128_seed0 -name '*.jpg' | head -48 | xargs /tmp/huffman_floor
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <jpeglib.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    static const char *names[] = {"Huffman only", "decode 8/8", "decode 2/8", "decode 1/8"};
    static const int scale[] = {8, 8, 2, 1};
    double total[4] = {0};
    double bytes = 0;
    int n = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE.jpg...\n", argv[0]);
        return 2;
    }
    for (int f = 1; f < argc; f++) {
        FILE *fp = fopen(argv[f], "rb");
        if (!fp) {
            perror(argv[f]);
            return 1;
        }
        long size = (fseek(fp, 0, SEEK_END) == 0) ? ftell(fp) : -1;
        unsigned char *buf = size > 0 ? malloc((size_t)size) : NULL;
        if (!buf || fseek(fp, 0, SEEK_SET) != 0 || fread(buf, 1, (size_t)size, fp) != (size_t)size) {
            fprintf(stderr, "%s: cannot read\n", argv[f]);
            return 1;
        }
        fclose(fp);
        bytes += (double)size;
        n++;
        for (int m = 0; m < 4; m++) {
            struct jpeg_decompress_struct ci;
            struct jpeg_error_mgr je;
            ci.err = jpeg_std_error(&je); /* a corrupt file exits with libjpeg's message */
            jpeg_create_decompress(&ci);
            double t0 = now_us();
            jpeg_mem_src(&ci, buf, (unsigned long)size);
            jpeg_read_header(&ci, TRUE);
            ci.dct_method = JDCT_ISLOW;
            ci.out_color_space = JCS_RGB;
            ci.scale_num = (unsigned)scale[m];
            ci.scale_denom = 8;
            jpeg_start_decompress(&ci);
            if (m == 0) {
                if (ci.output_height > 1 && jpeg_skip_scanlines(&ci, ci.output_height - 1) != ci.output_height - 1) {
                    fprintf(stderr, "%s: skip failed\n", argv[f]);
                    return 1;
                }
            } else {
                JSAMPROW row = malloc((size_t)ci.output_width * 3);
                if (!row)
                    return 1;
                while (ci.output_scanline < ci.output_height)
                    if (jpeg_read_scanlines(&ci, &row, 1) != 1) {
                        fprintf(stderr, "%s: decode stopped\n", argv[f]);
                        return 1;
                    }
                free(row);
            }
            total[m] += now_us() - t0;
            jpeg_abort_decompress(&ci);
            jpeg_destroy_decompress(&ci);
        }
        free(buf);
    }
    printf("%d files, %.0f kB per file\n", n, bytes / 1024 / n);
    for (int m = 0; m < 4; m++)
        printf("%-14s %9.0f us/file %7.2f us/kB\n", names[m], total[m] / n, total[m] / (bytes / 1024));
    return 0;
}
