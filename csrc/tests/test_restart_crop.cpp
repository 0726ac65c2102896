/* test_restart_crop.cpp - sanitizer driver for the restart-segment crop decode
 * (csrc/image/decode/fq_image_restart_crop.cpp), the lossless prepare (csrc/image/decode/fq_image_prepare.cpp) and the SIMD
 * float32 write: JPEGs with restart intervals (4:2:0 and gray: Debian's OpenCV 4.6
 * cannot choose the sampling; tests/image/test_restart_crop_decode.py covers 4:2:2 / 4:4:4) and
 * prepared files, every prefix (truncation) and random byte corruptions, segment
 * decoding on and off.  Intact files must give identical bytes both ways; broken ones
 * must fail cleanly or decode (never crash, never touch memory they do not own).
 * Build and run from the repo root:
 *
 *   mkdir -p build && (cd build && gcc -std=c11 -g -fsanitize=address,undefined -I../csrc \
 *       -c ../csrc/core/fq_common.c ../csrc/core/fq_io.c ../csrc/core/fq_cpu.c) && \
 *   g++ -std=c++17 -g -O1 -Wall -Wextra -Werror -fsanitize=address,undefined -fno-omit-frame-pointer \
 *       -Icsrc -I/usr/include/opencv4 csrc/tests/test_restart_crop.cpp $(find csrc/image -name '*.cpp') build/fq_common.o build/fq_io.o build/fq_cpu.o \
 *       -lopencv_imgcodecs -lopencv_imgproc -lopencv_core -ljpeg -o build/test_restart_crop_san && \
 *   UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ./build/test_restart_crop_san
 *
 * Exit status 0 and "all N checks passed" on success.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "image/fq_image.h"
#include "image/fq_image_prepare.h"
#include "fq_test_ops.h"

static int g_checks = 0, g_failed = 0;
#include "fq_check.h"
#define CHECK FQ_CHECK_COUNT

static std::vector<uint8_t> encode(const cv::Mat &img, std::vector<int> params)
{
    std::vector<uint8_t> out;
    cv::imencode(".jpg", img, out, params);
    return out;
}

static fq_img_spec *spec(int channels, int dct)
{
    fq_op ops[3] = {
        op_rrc({.out_h = 56, .out_w = 64, .scale_lo = 0.02, .scale_hi = 0.6, .ratio_lo = 0.75, .ratio_hi = 1.3333,
                .interp = FQ_INTERP_BILINEAR, .max_attempts = 10}),
        op_hflip(0.5),
        op_normalize({.mean = {0.485, 0.456, 0.406}, .std = {0.229, 0.224, 0.225}}),
    };
    fq_img_format fmt = {channels, FQ_DT_FLOAT32, FQ_LAYOUT_HWC, 0, dct, FQ_ORDER_RGB, FQ_IDCT_ACCURATE};
    fq_img_spec *sp = nullptr;
    fq_err err;
    fq_clear_err(&err);
    int rc = fq_img_spec_create(ops, 3, &fmt, &sp, &err);
    CHECK(rc == FQ_OK, "spec_create: %s", err.msg);
    return sp;
}

int main()
{
    std::mt19937 rng(7);
    cv::Mat bgr(333, 517, CV_8UC3);
    for (int y = 0; y < bgr.rows; y++)
        for (int x = 0; x < bgr.cols; x++)
            bgr.at<cv::Vec3b>(y, x) = cv::Vec3b((uint8_t)(x * 3 + y), (uint8_t)(y * 2 ^ x), (uint8_t)(rng() & 63));
    cv::Mat gray;
    cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
    struct Case {
        const char *name;
        std::vector<uint8_t> data;
        int channels;
    };
    std::vector<Case> cases;
    /* 517 px: 33 MCUs of 16 (divisors 1, 3, 11) / 65 blocks of 8 (1, 5, 13) */
    cases.push_back({"420 ri3", encode(bgr, {cv::IMWRITE_JPEG_RST_INTERVAL, 3}), 3});
    cases.push_back({"420 ri11", encode(bgr, {cv::IMWRITE_JPEG_RST_INTERVAL, 11}), 3});
    cases.push_back({"gray ri13", encode(gray, {cv::IMWRITE_JPEG_RST_INTERVAL, 13}), 1});
    cases.push_back({"420 ri4 (does not divide)", encode(bgr, {cv::IMWRITE_JPEG_RST_INTERVAL, 4}), 3});
    {
        std::vector<uint8_t> plain = encode(bgr, {cv::IMWRITE_JPEG_QUALITY, 90});
        uint8_t *out = nullptr;
        fq_prepare_info info;
        fq_err err;
        fq_clear_err(&err);
        int rc = fq_jpeg_prepare(plain.data(), plain.size(), 4, &out, &info, &err);
        CHECK(rc == FQ_OK && info.status == FQ_PREP_REWRITTEN && out, "prepare: %s", err.msg);
        if (out) {
            cases.push_back({"prepared", std::vector<uint8_t>(out, out + info.out_bytes), 3});
            fq_jpeg_prepare_free(out);
            /* a prepared file is kept as it is */
            rc = fq_jpeg_prepare(cases.back().data.data(), cases.back().data.size(), 4, &out, &info, &err);
            CHECK(rc == FQ_OK && info.status == FQ_PREP_KEPT && !out, "re-prepare");
        }
        /* truncated input: an error, nothing allocated */
        for (size_t n = 0; n < plain.size(); n += 211) {
            rc = fq_jpeg_prepare(plain.data(), n, 4, &out, &info, &err);
            CHECK((rc != FQ_OK && !out) || (rc == FQ_OK && info.status == FQ_PREP_KEPT && !out) ||
                      (rc == FQ_OK && out), "prepare prefix %zu", n);
            fq_jpeg_prepare_free(out);
            out = nullptr;
        }
    }
    fq_img_scratch *s = fq_img_scratch_new();
    for (const Case &c : cases) {
        for (int dct = 0; dct < 2; dct++) {
            fq_img_spec *sp = spec(c.channels, dct);
            size_t row = fq_img_spec_row_bytes(sp);
            std::vector<uint8_t> a(row), b(row);
            fq_err err;
            uint64_t before = fq_img_segment_decode_count();
            for (uint64_t i = 0; i < 24; i++) {
                fq_img_segment_decode_set(0);
                int ra = fq_img_process_encoded(sp, s, c.data.data(), c.data.size(), 3, dct, i, a.data(), nullptr,
                                                &err);
                fq_img_segment_decode_set(1);
                int rb = fq_img_process_encoded(sp, s, c.data.data(), c.data.size(), 3, dct, i, b.data(), nullptr,
                                                &err);
                CHECK(ra == FQ_OK && rb == FQ_OK && a == b, "%s dct %d sample %llu: identical", c.name, dct,
                      (unsigned long long)i);
            }
            bool divides = std::strstr(c.name, "does not") == nullptr;
            CHECK((fq_img_segment_decode_count() > before) == divides, "%s: segment path used: %d", c.name,
                  divides);
            /* every 37th prefix and 60 random corruptions: no crash, no sanitizer report */
            for (size_t n = 0; n < c.data.size(); n += 37) {
                std::vector<uint8_t> t(c.data.begin(), c.data.begin() + n); /* exact-size heap copy */
                fq_img_process_encoded(sp, s, t.data(), t.size(), 3, dct, n, b.data(), nullptr, &err);
            }
            for (int k = 0; k < 60; k++) {
                std::vector<uint8_t> t = c.data;
                for (int j = 0; j < 4; j++) {
                    size_t p = 2 + rng() % (t.size() - 2);
                    t[p] = (uint8_t)(k % 3 == 0 ? 0xFF : rng());
                    if (k % 3 == 0 && p + 1 < t.size())
                        t[p + 1] = (uint8_t)(0xD0 + rng() % 10);
                }
                fq_img_process_encoded(sp, s, t.data(), t.size(), 3, dct, k, b.data(), nullptr, &err);
            }
            fq_img_spec_free(sp);
        }
    }
    fq_img_scratch_free(s);
    if (g_failed) {
        std::fprintf(stderr, "%d of %d checks failed\n", g_failed, g_checks);
        return 1;
    }
    std::printf("all %d checks passed\n", g_checks);
    return 0;
}
