/* fuzz_decode.cpp - libFuzzer harness for the decoder entry point fq_img_process_encoded().
 *
 * Build and run: csrc/tests/run_fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
 *
 * Input layout: byte 0 selects one of the output configurations below and the
 * (seed, epoch, index) key; the rest is the encoded image (JPEG, PNG, WebP, BMP, ...
 * whatever the bytes turn out to be).  The configurations cover the decoder's paths:
 * ROI + DCT-scaled JPEG decode (RandomResizedCrop / Resize first, dct_scaling on),
 * full decode (dct_scaling off, CenterCrop first, the fast inverse DCT), gray output, float NCHW output,
 * RandomCrop with padding, and a small max_pixels so the size guard is exercised.
 *
 * A run fails on: any sanitizer report, a crash, a hang (libFuzzer -timeout), or a
 * broken contract of fq_image.h, checked after every call:
 *   - the status is FQ_OK or one of the documented codes, with a non-empty message
 *     on error;
 *   - on success the explain record is consistent with the spec (output size,
 *     source size within max_pixels);
 *   - the result is a function of the input: processing the same bytes again with a
 *     second scratch that just decoded the previous input gives the same status and
 *     the same output bytes (no state carried between samples).
 *
 * Single-threaded: libFuzzer calls LLVMFuzzerTestOneInput from one thread; the
 * specs and scratch objects are created once and live for the whole process.
 *
 * The op parameters below are filled by name (fq_test_ops.h): a renamed or moved
 * parameter in fq_image.h is a compile error here.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "image/fq_image.h"
#include "fq_test_ops.h"

namespace {

[[noreturn]] void fail(const char *what, int cfg, int rc, const char *msg)
{
    std::fprintf(stderr, "fuzz_decode: %s (config %d, rc %d %s: %s)\n", what, cfg, rc, fq_code_name(rc), msg);
    std::abort();
}

struct Config {
    fq_img_spec *spec = nullptr;
    int64_t max_pixels = 0;
    std::vector<unsigned char> out, out2;
};

constexpr int N_CONFIGS = 6;
Config g_cfg[N_CONFIGS];
fq_img_scratch *g_scratch = nullptr;
fq_img_scratch *g_scratch2 = nullptr;

void make_config(int i, std::vector<fq_op> ops, int channels, int dtype, int layout, int64_t max_pixels,
                 int dct_scaling, int idct = FQ_IDCT_ACCURATE)
{
    fq_img_format fmt;
    std::memset(&fmt, 0, sizeof fmt);
    fmt.channels = channels;
    fmt.dtype = dtype;
    fmt.layout = layout;
    fmt.max_pixels = max_pixels;
    fmt.dct_scaling = dct_scaling;
    fmt.idct = idct;
    fq_err err;
    fq_clear_err(&err);
    int rc = fq_img_spec_create(ops.data(), (int)ops.size(), &fmt, &g_cfg[i].spec, &err);
    if (rc != FQ_OK)
        fail("fq_img_spec_create", i, rc, err.msg);
    g_cfg[i].max_pixels = max_pixels;
    g_cfg[i].out.resize(fq_img_spec_row_bytes(g_cfg[i].spec));
    g_cfg[i].out2.resize(fq_img_spec_row_bytes(g_cfg[i].spec));
}

void init()
{
    const int64_t big = FQ_IMG_DEFAULT_MAX_PIXELS;
    /* 0: the ImageNet training chain: ROI + DCT-scaled decode */
    make_config(0, {op_rrc({.out_h = 24, .out_w = 24, .scale_lo = 0.08, .scale_hi = 1.0, .ratio_lo = 3.0 / 4, .ratio_hi = 4.0 / 3, .interp = FQ_INTERP_BILINEAR, .max_attempts = 10}),
                    op_hflip(0.5),
                    op_color_jitter({.range = {{0.6, 1.4}, {0.6, 1.4}, {0.6, 1.4}, {-0.1, 0.1}}, .enabled = {1, 1, 1, 1}}),
                    op_normalize({.mean = {0.485, 0.456, 0.406}, .std = {0.229, 0.224, 0.225}})},
                3, FQ_DT_FLOAT32, FQ_LAYOUT_HWC, big, 1);
    /* 1: evaluation chain: Resize(shorter side) + CenterCrop, DCT scaling on */
    make_config(1, {op_resize({.out_h = 0, .out_w = 0, .shorter_side = 20, .interp = FQ_INTERP_AREA}), op_center_crop(16, 16)},
                3, FQ_DT_UINT8, FQ_LAYOUT_CHW, big, 1);
    /* 2: full decode (no DCT scaling), gray output, exact resize */
    make_config(2, {op_resize({.out_h = 12, .out_w = 20, .shorter_side = 0, .interp = FQ_INTERP_BICUBIC}), op_vflip(0.5),
                    op_grayscale(0.5)},
                1, FQ_DT_UINT8, FQ_LAYOUT_HWC, big, 0);
    /* 3: CenterCrop first (zero padding for small images) + affine, float16, the fast inverse DCT */
    make_config(3, {op_center_crop(16, 16),
                    op_random_affine({.degrees = {-30, 30}, .translate = {0.1, 0.1}, .scale = {0.8, 1.2}, .shear_x = {-10, 10}, .shear_y = {-5, 5}, .border = FQ_BORDER_REFLECT, .fill = {0, 0, 0}, .interp = FQ_INTERP_BILINEAR})},
                3, FQ_DT_FLOAT16, FQ_LAYOUT_HWC, big, 1, FQ_IDCT_FAST);
    /* 4: RandomCrop with padding and pad_if_needed */
    make_config(4, {op_random_crop({.out_h = 16, .out_w = 16, .pad_left = 2, .pad_top = 2, .pad_right = 2, .pad_bottom = 2, .pad_if_needed = 1, .border = FQ_BORDER_SYMMETRIC, .fill = {0, 0, 0}})},
                3, FQ_DT_UINT8, FQ_LAYOUT_HWC, big, 1);
    /* 5: a small decompression-bomb guard */
    make_config(5, {op_rrc({.out_h = 8, .out_w = 8, .scale_lo = 0.5, .scale_hi = 1.0, .ratio_lo = 3.0 / 4, .ratio_hi = 4.0 / 3, .interp = FQ_INTERP_NEAREST, .max_attempts = 10})},
                3, FQ_DT_UINT8, FQ_LAYOUT_HWC, 4096, 1);
    g_scratch = fq_img_scratch_new();
    g_scratch2 = fq_img_scratch_new();
    if (!g_scratch || !g_scratch2)
        fail("fq_img_scratch_new", -1, FQ_E_NOMEM, "NULL");
    fq_img_set_opencv_threads(1);
}

bool documented(int rc)
{
    switch (rc) {
    case FQ_OK:
    case FQ_E_EMPTY:
    case FQ_E_DECODE:
    case FQ_E_UNSUPPORTED:
    case FQ_E_TOO_LARGE:
    case FQ_E_INVALID:
    case FQ_E_NOMEM:
        return true;
    default:
        return false;
    }
}

/* The previous input, decoded on the second scratch between the two calls so the
 * second call starts from a scratch that holds another image's state. */
std::vector<uint8_t> g_prev;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready = (init(), true);
    (void)ready;
    if (size < 1)
        return 0;
    const int cfg = data[0] % N_CONFIGS;
    const uint64_t seed = data[0] >> 3, epoch = data[0] & 1, index = data[0] >> 1;
    Config &c = g_cfg[cfg];
    const uint8_t *img = data + 1;
    size_t len = size - 1;

    fq_img_explain ex;
    fq_err err;
    fq_clear_err(&err);
    int rc = fq_img_process_encoded(c.spec, g_scratch, img, len, seed, epoch, index, c.out.data(), &ex, &err);
    if (!documented(rc))
        fail("undocumented status", cfg, rc, err.msg);
    if (rc != FQ_OK && err.msg[0] == '\0')
        fail("error without a message", cfg, rc, err.msg);
    if (rc == FQ_OK) {
        int h = 0, w = 0, ch = 0;
        fq_img_spec_out_shape(c.spec, &h, &w, &ch);
        if (ex.out_h != h || ex.out_w != w || ex.out_c != ch)
            fail("explain out shape differs from the spec", cfg, rc, "");
        if (ex.src_h < 1 || ex.src_w < 1 || (int64_t)ex.src_h * ex.src_w > c.max_pixels)
            fail("decoded a source outside (0, max_pixels]", cfg, rc, "");
    }

    /* Same bytes again on the other scratch after it decoded something else. */
    fq_err err2;
    fq_clear_err(&err2);
    if (!g_prev.empty())
        (void)fq_img_process_encoded(c.spec, g_scratch2, g_prev.data(), g_prev.size(), 0, 0, 0, c.out2.data(),
                                     nullptr, &err2);
    fq_clear_err(&err2);
    int rc2 = fq_img_process_encoded(c.spec, g_scratch2, img, len, seed, epoch, index, c.out2.data(), nullptr,
                                     &err2);
    if (rc2 != rc)
        fail("status differs on a second run of the same bytes", cfg, rc2, err2.msg);
    if (rc == FQ_OK && std::memcmp(c.out.data(), c.out2.data(), c.out.size()) != 0)
        fail("output differs on a second run of the same bytes", cfg, rc, "");
    g_prev.assign(img, img + len);
    return 0;
}
