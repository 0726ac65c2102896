/* test_image.cpp - C++ driver for the fq_image C API (no Python), meant to run under
 * AddressSanitizer + UndefinedBehaviorSanitizer.  Build and run from the repo root:
 *
 *   mkdir -p build && (cd build && gcc -std=c11 -g -fsanitize=address,undefined -I../csrc \
 *       -c ../csrc/core/fq_common.c ../csrc/core/fq_io.c ../csrc/core/fq_cpu.c) && \
 *   g++ -std=c++17 -g -O1 -Wall -Wextra -fsanitize=address,undefined -fno-omit-frame-pointer \
 *       -Icsrc -I/usr/include/opencv4 csrc/tests/test_image.cpp $(find csrc/image -name '*.cpp') build/fq_common.o build/fq_io.o build/fq_cpu.o \
 *       -lopencv_imgcodecs -lopencv_imgproc -lopencv_core -ljpeg -o build/test_image_san && \
 *   UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ./build/test_image_san
 *
 * Exit status 0 and "all N checks passed" on success.
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "image/fq_image.h"
#include "core/fq_rng.h"
#include "fq_test_ops.h"

static int g_checks = 0, g_failed = 0;
#include "fq_check.h"
#define CHECK FQ_CHECK_COUNT

static fq_img_spec *make_spec(const std::vector<fq_op> &ops, int dtype, int channels = 3, int64_t max_px = 0,
                              int dct = 1)
{
    fq_img_format fmt = {channels, dtype, FQ_LAYOUT_HWC, max_px, dct, FQ_ORDER_RGB, FQ_IDCT_ACCURATE};
    fq_img_spec *sp = nullptr;
    fq_err err;
    fq_clear_err(&err);
    int rc = fq_img_spec_create(ops.data(), (int)ops.size(), &fmt, &sp, &err);
    CHECK(rc == FQ_OK, "spec_create: %s", err.msg);
    return sp;
}

static cv::Mat photo(int h, int w, uint64_t seed)
{
    /* smooth gradients + noise: something JPEG encodes with real content */
    cv::Mat m(h, w, CV_8UC3);
    fq_rng r;
    fq_rng_init(&r, seed, 0, 0);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            cv::Vec3b &p = m.at<cv::Vec3b>(y, x);
            p[0] = (uint8_t)((x * 255) / w);
            p[1] = (uint8_t)((y * 255) / h);
            p[2] = (uint8_t)(128 + 100 * std::sin(x * 0.05 + y * 0.03) + (int)fq_rng_next_below(&r, 20));
        }
    return m;
}

static std::vector<uint8_t> encode(const cv::Mat &m, const char *ext, std::vector<int> params = {})
{
    std::vector<uint8_t> buf;
    bool ok = cv::imencode(ext, m, buf, params);
    CHECK(ok, "imencode %s", ext);
    return buf;
}

static void test_rng()
{
    fq_rng a, b, c;
    fq_rng_init(&a, 1, 2, 3);
    fq_rng_init(&b, 1, 2, 3);
    fq_rng_init(&c, 1, 2, 4);
    bool same = true, diff = false;
    for (int i = 0; i < 100; i++) {
        uint64_t x = fq_rng_next_u64(&a), y = fq_rng_next_u64(&b), z = fq_rng_next_u64(&c);
        same = same && x == y;
        diff = diff || x != z;
    }
    CHECK(same, "same key, same stream");
    CHECK(diff, "different index, different stream");
    double lo = 1, hi = 0, sum = 0;
    for (int i = 0; i < 10000; i++) {
        double u = fq_rng_uniform_range(&a, -2.0, 3.0);
        lo = std::min(lo, u), hi = std::max(hi, u), sum += u;
    }
    CHECK(lo >= -2.0 && hi < 3.0 && std::fabs(sum / 10000 - 0.5) < 0.1, "uniform_range %f %f %f", lo, hi, sum);
    for (int i = 0; i < 1000; i++)
        CHECK(fq_rng_next_below(&a, 7) < 7, "below");
}

static void test_spec_validation()
{
    fq_img_format fmt = {3, FQ_DT_FLOAT32, FQ_LAYOUT_HWC, 0, 1, FQ_ORDER_RGB, FQ_IDCT_ACCURATE};
    fq_img_spec *sp = nullptr;
    fq_err err;
    std::vector<fq_op> bad[] = {
        {op_hflip(0.5)},                                          /* no fixed size */
        {op_rrc({.out_h = 224, .out_w = 224, .scale_lo = 0.9, .scale_hi = 0.1, .ratio_lo = 0.75, .ratio_hi = 1.33, .interp = 1, .max_attempts = 10})}, /* scale */
        {op_normalize({.mean = {0, 0, 0}, .std = {1, 1, 1}}), op_center_crop(8, 8)}, /* order */
        {op_center_crop(0, 8)},
        {op_center_crop(8, 8), op_hflip(1.5)},
        {fq_op_new(99)},
        {op_center_crop(8, 8), op_resize({.out_h = 0, .out_w = 0, .shorter_side = 32, .interp = 1})}, /* variable at the end */
    };
    for (auto &ops : bad) {
        fq_clear_err(&err);
        int rc = fq_img_spec_create(ops.data(), (int)ops.size(), &fmt, &sp, &err);
        CHECK(rc == FQ_E_INVALID && err.msg[0] && sp == nullptr, "expected FQ_E_INVALID, got %d (%s)", rc, err.msg);
    }
    fq_img_format bad_fmt = {2, FQ_DT_FLOAT32, FQ_LAYOUT_HWC, 0, 1, FQ_ORDER_RGB, FQ_IDCT_ACCURATE};
    std::vector<fq_op> ok = {op_center_crop(8, 8)};
    CHECK(fq_img_spec_create(ok.data(), 1, &bad_fmt, &sp, &err) == FQ_E_INVALID, "channels=2");
    bad_fmt.channels = 3;
    bad_fmt.idct = 2;
    fq_clear_err(&err);
    CHECK(fq_img_spec_create(ok.data(), 1, &bad_fmt, &sp, &err) == FQ_E_INVALID && std::strstr(err.msg, "idct"),
          "idct=2: %s", err.msg);
}

/* One record per op kind, in enum order; the chain rules and plan_decode through the C API. */
static void test_op_records_and_plans()
{
    static const char *const names[] = {"RandomResizedCrop", "Resize", "CenterCrop", "RandomCrop", "HorizontalFlip",
                                        "VerticalFlip", "ColorJitter", "RandomAffine", "Grayscale", "Normalize"};
    /* the named kinds of enum fq_op_kind are the first records, in order */
    CHECK(fq_img_op_count() >= (int)(sizeof names / sizeof names[0]), "op kinds");
    for (int k = 1; k <= (int)(sizeof names / sizeof names[0]); k++)
        CHECK(std::strcmp(fq_img_op_name(k), names[k - 1]) == 0, "kind %d: %s", k, fq_img_op_name(k));
    CHECK(fq_img_op_kind("Normalize") == FQ_OP_NORMALIZE && fq_img_op_kind("RandomCrop") == FQ_OP_RANDOM_CROP &&
              fq_img_op_kind("nope") == FQ_OP_NONE && fq_img_op_kind(nullptr) == FQ_OP_NONE, "op kind by name");
    const int n_kinds = fq_img_op_count();
    CHECK(std::strcmp(fq_img_op_name(n_kinds + 1), "?") == 0 && std::strcmp(fq_img_op_name(0), "?") == 0, "?");
    CHECK(fq_img_op_desc(0) == nullptr && fq_img_op_desc(n_kinds + 1) == nullptr, "desc out of range");
    /* every descriptor: its own kind and name, doubles laid out without gaps within fq_op.raw */
    for (int k = 1; k <= n_kinds; k++) {
        const fq_op_desc *d = fq_img_op_desc(k);
        CHECK(d && d->kind == k && std::strcmp(d->name, fq_img_op_name(k)) == 0 && d->n_fields > 0, "desc %d", k);
        size_t at = 0;
        for (int i = 0; i < d->n_fields; i++) {
            const fq_op_field &f = d->fields[i];
            CHECK(f.type == FQ_FIELD_F64 && f.offset == at && f.ndim >= 0 && f.ndim <= 2, "%s.%s", d->name, f.name);
            size_t count = 1;
            for (int j = 0; j < f.ndim; j++)
                count *= (size_t)f.shape[j];
            at += count * sizeof(double);
        }
        CHECK(at == d->params_size && at <= sizeof(((fq_op *)nullptr)->raw), "%s covers its struct", d->name);
    }
    /* the descriptor of a named struct says what the struct says */
    const fq_op_desc *rc = fq_img_op_desc(FQ_OP_RANDOM_CROP);
    CHECK(rc->params_size == sizeof(fq_op_random_crop) && std::strcmp(rc->fields[8].name, "fill") == 0 &&
              rc->fields[8].offset == offsetof(fq_op_random_crop, fill) && rc->fields[8].shape[0] == 3,
          "RandomCrop desc");
    const fq_op_desc *cj = fq_img_op_desc(FQ_OP_COLOR_JITTER);
    CHECK(cj->fields[0].ndim == 2 && cj->fields[0].shape[0] == 4 && cj->fields[0].shape[1] == 2, "ColorJitter desc");
    CHECK(fq_img_op_explain_fields(FQ_OP_RANDOM_CROP) == (FQ_EXPLAIN_BOX | FQ_EXPLAIN_PAD), "explain fields");
    CHECK(std::strcmp(fq_img_interp_name(FQ_INTERP_LANCZOS), "lanczos") == 0, "interp name");
    CHECK(std::strcmp(fq_img_border_name(FQ_BORDER_SYMMETRIC), "symmetric") == 0, "border name");

    fq_err err;
    fq_img_chain_info info;
    std::vector<fq_op> chain = {op_resize({.out_h = 0, .out_w = 0, .shorter_side = 40, .interp = FQ_INTERP_AREA}),
                                op_center_crop(32, 24), op_hflip(0.5)};
    fq_clear_err(&err);
    CHECK(fq_img_chain_check(chain.data(), 3, FQ_DT_UINT8, &info, &err) == FQ_OK, "%s", err.msg);
    CHECK(info.out_h == 32 && info.out_w == 24 && !info.keeps_size && !info.normalize, "chain info");
    CHECK(fq_img_chain_check(chain.data(), 1, FQ_DT_UINT8, &info, &err) == FQ_E_INVALID && info.out_h == 0 &&
              !info.keeps_size, "variable size");
    CHECK(fq_img_chain_check(chain.data() + 2, 1, FQ_DT_UINT8, &info, &err) == FQ_E_INVALID && info.keeps_size,
          "keeps size");

    /* CenterCrop(32 x 24) of a 100 x 80 JPEG: box (28, 34, 24, 32), ROI with a 16 px margin */
    fq_img_spec *sp = make_spec({op_center_crop(32, 24)}, FQ_DT_UINT8);
    fq_img_decode_plan dp;
    CHECK(fq_img_plan_decode(sp, 100, 80, 1, 2, 3, &dp, &err) == FQ_OK, "%s", err.msg);
    CHECK(dp.box_op && !dp.resize_after && dp.scale_num == 8 && dp.box[0] == 28 && dp.box[1] == 34 &&
              dp.box[2] == 24 && dp.box[3] == 32, "center crop box");
    CHECK(dp.roi_used && dp.roi[0] == 12 && dp.roi[1] == 18 && dp.roi[2] == 56 && dp.roi[3] == 64, "roi");
    fq_img_spec_free(sp);
    /* Resize((20, 10)) of 100 x 80: 1/8 fails (100 * 1 < 20 * 8), 2/8 holds (160 >= 80, 200 >= 160) */
    sp = make_spec({op_resize({.out_h = 20, .out_w = 10, .shorter_side = 0, .interp = FQ_INTERP_BILINEAR})},
                   FQ_DT_UINT8);
    CHECK(fq_img_plan_decode(sp, 100, 80, 0, 0, 0, &dp, &err) == FQ_OK, "%s", err.msg);
    CHECK(dp.resize_after && !dp.box_op && dp.scale_num == 2 && dp.scaled_h == 25 && dp.scaled_w == 20 &&
              !dp.roi_used && dp.interp == FQ_INTERP_BILINEAR, "resize: scale %d", dp.scale_num);
    CHECK(fq_img_plan_decode(sp, 0, 80, 0, 0, 0, &dp, &err) == FQ_E_INVALID, "bad size");
    fq_img_spec_free(sp);
}

static void test_jpeg_paths()
{
    cv::Mat bgr = photo(300, 420, 7);
    std::vector<uint8_t> jpg = encode(bgr, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 90});
    std::vector<fq_op> ops = {op_rrc({.out_h = 64, .out_w = 48, .scale_lo = 0.08, .scale_hi = 1.0, .ratio_lo = 0.75, .ratio_hi = 4.0 / 3, .interp = 1, .max_attempts = 10}),
                              op_hflip(0.5), op_color_jitter({.range = {{0.6, 1.4}, {0.6, 1.4}, {0.6, 1.4}, {-0.1, 0.1}}, .enabled = {1, 1, 1, 1}}),
                              op_random_affine({.degrees = {-10, 10}, .translate = {0.1, 0.1}, .scale = {0.9, 1.1}, .shear_x = {-5, 5}, .shear_y = {0, 0}, .border = 0, .fill = {0, 0, 0}, .interp = 1}),
                              op_grayscale(0.2),
                              op_normalize({.mean = {0.485, 0.456, 0.406}, .std = {0.229, 0.224, 0.225}})};
    fq_img_spec *sp = make_spec(ops, FQ_DT_FLOAT32);
    if (!sp)
        return;
    int h, w, c;
    fq_img_spec_out_shape(sp, &h, &w, &c);
    CHECK(h == 64 && w == 48 && c == 3, "shape");
    CHECK(fq_img_spec_row_bytes(sp) == (size_t)64 * 48 * 3 * 4, "row bytes");
    fq_img_scratch *s1 = fq_img_scratch_new(), *s2 = fq_img_scratch_new();
    std::vector<float> o1(64 * 48 * 3), o2(64 * 48 * 3);
    fq_err err;
    fq_img_explain ex;
    for (uint64_t i = 0; i < 40; i++) {
        int rc = fq_img_process_encoded(sp, s1, jpg.data(), jpg.size(), 5, 1, i, o1.data(), &ex, &err);
        CHECK(rc == FQ_OK, "process: %s", err.msg);
        rc = fq_img_process_encoded(sp, s2, jpg.data(), jpg.size(), 5, 1, i, o2.data(), nullptr, &err);
        CHECK(rc == FQ_OK && std::memcmp(o1.data(), o2.data(), o1.size() * 4) == 0, "determinism %d", (int)i);
        CHECK(ex.src_h == 300 && ex.src_w == 420 && ex.n_ops == 5 && ex.has_crop, "explain");
        CHECK(ex.crop_src[2] >= 1 && ex.crop_src[0] + ex.crop_src[2] <= 420, "crop box");
    }
    /* every truncation of the file must fail cleanly (or decode, for the full file) */
    for (size_t n = 0; n < jpg.size(); n += (n < 700 ? 1 : 97)) {
        int rc = fq_img_process_encoded(sp, s1, jpg.data(), n, 5, 1, n, o1.data(), &ex, &err);
        CHECK(rc == FQ_E_DECODE || (n == 0 && rc == FQ_E_EMPTY), "truncated at %zu: rc %d %s", n, rc, err.msg);
        CHECK(rc == FQ_OK || err.msg[0], "message");
    }
    /* random corruption: any outcome but a crash; errors carry a message */
    std::mt19937 gen(1);
    int n_ok = 0, n_err = 0;
    for (int t = 0; t < 300; t++) {
        std::vector<uint8_t> bad = jpg;
        int flips = 1 + (int)(gen() % 8);
        for (int k = 0; k < flips; k++)
            bad[2 + gen() % (bad.size() - 2)] = (uint8_t)gen();
        int rc = fq_img_process_encoded(sp, s1, bad.data(), bad.size(), 0, 0, (uint64_t)t, o1.data(), &ex, &err);
        if (rc == FQ_OK)
            n_ok++;
        else {
            n_err++;
            CHECK(err.msg[0] != 0, "corrupt: empty message for rc %d", rc);
        }
    }
    std::printf("corrupted JPEGs: %d decoded, %d rejected\n", n_ok, n_err);
    /* decompression bomb: patch the SOF0 dimensions to 60000 x 60000 */
    std::vector<uint8_t> bomb = jpg;
    for (size_t i = 2; i + 9 < bomb.size();) {
        size_t len = ((size_t)bomb[i + 2] << 8) | bomb[i + 3];
        if (bomb[i + 1] == 0xC0) {
            bomb[i + 5] = 0xEA, bomb[i + 6] = 0x60, bomb[i + 7] = 0xEA, bomb[i + 8] = 0x60;
            break;
        }
        i += 2 + len;
    }
    int rc = fq_img_process_encoded(sp, s1, bomb.data(), bomb.size(), 0, 0, 0, o1.data(), &ex, &err);
    CHECK(rc == FQ_E_TOO_LARGE && std::strstr(err.msg, "max_pixels"), "bomb: %d %s", rc, err.msg);
    /* small max_pixels */
    fq_img_spec *tiny = make_spec({op_center_crop(8, 8)}, FQ_DT_UINT8, 3, 1000);
    std::vector<uint8_t> o8(8 * 8 * 3);
    rc = fq_img_process_encoded(tiny, s1, jpg.data(), jpg.size(), 0, 0, 0, o8.data(), nullptr, &err);
    CHECK(rc == FQ_E_TOO_LARGE, "max_pixels: %d %s", rc, err.msg);
    /* the scratch is still usable after errors */
    rc = fq_img_process_encoded(sp, s1, jpg.data(), jpg.size(), 5, 1, 3, o1.data(), nullptr, &err);
    CHECK(rc == FQ_OK, "after errors: %s", err.msg);
    fq_img_spec_free(tiny);
    fq_img_scratch_free(s1);
    fq_img_scratch_free(s2);
    fq_img_spec_free(sp);
}

static void test_other_inputs()
{
    fq_img_spec *sp = make_spec({op_resize({.out_h = 0, .out_w = 0, .shorter_side = 40, .interp = 2}), op_center_crop(32, 32),
                                 op_vflip(0.5)},
                                FQ_DT_UINT8);
    fq_img_scratch *s = fq_img_scratch_new();
    std::vector<uint8_t> out(32 * 32 * 3);
    fq_err err;
    fq_img_explain ex;
    cv::Mat bgr = photo(120, 90, 3);
    /* empty, garbage */
    int rc = fq_img_process_encoded(sp, s, out.data(), 0, 0, 0, 0, out.data(), &ex, &err);
    CHECK(rc == FQ_E_EMPTY, "empty: %d", rc);
    std::vector<uint8_t> junk(3000);
    for (size_t i = 0; i < junk.size(); i++)
        junk[i] = (uint8_t)(i * 7919 + 13);
    rc = fq_img_process_encoded(sp, s, junk.data(), junk.size(), 0, 0, 0, out.data(), &ex, &err);
    CHECK(rc == FQ_E_DECODE, "garbage: %d %s", rc, err.msg);
    /* PNG, 16-bit PNG, RGBA PNG, gray JPEG */
    cv::Mat b16;
    bgr.convertTo(b16, CV_16U, 257);
    cv::Mat bgra;
    cv::cvtColor(bgr, bgra, cv::COLOR_BGR2BGRA);
    cv::Mat gray;
    cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
    std::vector<std::vector<uint8_t>> good = {encode(bgr, ".png"), encode(b16, ".png"), encode(bgra, ".png"),
                                              encode(gray, ".jpg"), encode(bgr, ".bmp")};
    for (auto &g : good) {
        rc = fq_img_process_encoded(sp, s, g.data(), g.size(), 0, 0, 1, out.data(), &ex, &err);
        CHECK(rc == FQ_OK, "format %d: %s", ex.src_format, err.msg);
        /* truncated PNG/BMP must fail cleanly */
        rc = fq_img_process_encoded(sp, s, g.data(), g.size() / 2, 0, 0, 1, out.data(), &ex, &err);
        CHECK(rc != FQ_OK && err.msg[0], "truncated format %d: %d", ex.src_format, rc);
    }
    /* PNG header bomb */
    std::vector<uint8_t> png = encode(bgr, ".png");
    png[16] = 0, png[17] = 1, png[18] = 0x86, png[19] = 0xA0; /* width 100000 */
    png[20] = 0, png[21] = 1, png[22] = 0x86, png[23] = 0xA0;
    rc = fq_img_process_encoded(sp, s, png.data(), png.size(), 0, 0, 0, out.data(), &ex, &err);
    CHECK(rc == FQ_E_TOO_LARGE, "png bomb: %d %s", rc, err.msg);
    /* arrays: RGB, gray, RGBA, strided */
    cv::Mat rgb;
    cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    rc = fq_img_process_array(sp, s, rgb.data, rgb.rows, rgb.cols, 3, rgb.step[0], 0, 0, 0, out.data(), &ex, &err);
    CHECK(rc == FQ_OK, "array: %s", err.msg);
    rc = fq_img_process_array(sp, s, gray.data, gray.rows, gray.cols, 1, gray.step[0], 0, 0, 0, out.data(), &ex, &err);
    CHECK(rc == FQ_OK, "gray array: %s", err.msg);
    cv::Mat big(200, 200, CV_8UC4, cv::Scalar(1, 2, 3, 4));
    cv::Mat roi = big(cv::Rect(10, 10, 100, 60));
    rc = fq_img_process_array(sp, s, roi.data, roi.rows, roi.cols, 4, roi.step[0], 0, 0, 0, out.data(), &ex, &err);
    CHECK(rc == FQ_OK && out[0] == 1 && out[1] == 2 && out[2] == 3, "strided RGBA array: %s", err.msg);
    rc = fq_img_process_array(sp, s, rgb.data, 0, 10, 3, 30, 0, 0, 0, out.data(), &ex, &err);
    CHECK(rc == FQ_E_EMPTY, "empty array: %d", rc);
    rc = fq_img_process_array(sp, s, rgb.data, 10, 10, 2, 30, 0, 0, 0, out.data(), &ex, &err);
    CHECK(rc == FQ_E_UNSUPPORTED, "2-channel array: %d", rc);
    /* RandomCrop larger than the image without pad_if_needed: per-sample error */
    fq_img_spec *rc_sp = make_spec({op_random_crop({.out_h = 500, .out_w = 500, .pad_left = 0, .pad_top = 0, .pad_right = 0, .pad_bottom = 0, .pad_if_needed = 0, .border = 0, .fill = {0, 0, 0}})}, FQ_DT_UINT8);
    std::vector<uint8_t> big_out(500 * 500 * 3);
    rc = fq_img_process_array(rc_sp, s, rgb.data, rgb.rows, rgb.cols, 3, rgb.step[0], 0, 0, 0, big_out.data(), &ex, &err);
    CHECK(rc == FQ_E_INVALID && std::strstr(err.msg, "RandomCrop"), "random crop too large: %d %s", rc, err.msg);
    fq_img_spec_free(rc_sp);
    fq_img_scratch_free(s);
    fq_img_spec_free(sp);
}

int main()
{
    fq_img_set_opencv_threads(1);
    test_rng();
    test_spec_validation();
    test_op_records_and_plans();
    test_jpeg_paths();
    test_other_inputs();
    if (g_failed) {
        std::printf("%d of %d checks FAILED\n", g_failed, g_checks);
        return 1;
    }
    std::printf("all %d checks passed\n", g_checks);
    return 0;
}
