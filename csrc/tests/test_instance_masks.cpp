/* test_instance_masks.cpp - the per-instance mask rules (fq_image_targets_inst.cpp) under ASan + UBSan
 * with leak detection: polygons through a resize + flip record, in a box, RLE, a label map at
 * pixel centres and OpenCV's legacy sampling, and every error path (each must free what it
 * allocated).  Exactness against pycocotools is
 * tests/targets/test_instance_masks.py; this driver is for memory and undefined behaviour. */
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "image/fq_image_targets.h"
#include "tests/fq_check.h"

static int g_checks = 0, g_failed = 0;
#define CHECK FQ_CHECK_COUNT

static fq_img_explain record(int h, int w, int oh, int ow, bool flip)
{
    fq_img_explain ex;
    std::memset(&ex, 0, sizeof ex);
    ex.src_h = h, ex.src_w = w, ex.out_h = oh, ex.out_w = ow, ex.out_c = 3;
    ex.n_ops = 2;
    ex.ops[0].kind = fq_img_op_kind("Resize");
    ex.ops[0].in_h = h, ex.ops[0].in_w = w, ex.ops[0].out_h = oh, ex.ops[0].out_w = ow, ex.ops[0].applied = 1;
    ex.ops[1].kind = fq_img_op_kind("HorizontalFlip");
    ex.ops[1].in_h = oh, ex.ops[1].in_w = ow, ex.ops[1].out_h = oh, ex.ops[1].out_w = ow;
    ex.ops[1].applied = flip ? 1 : 0;
    return ex;
}

int main()
{
    const int H = 40, W = 60, OH = 80, OW = 90;
    for (int flip = 0; flip < 2; flip++) {
        fq_img_explain ex = record(H, W, OH, OW, flip);
        fq_err err;
        std::memset(&err, 0, sizeof err);
        /* two rings, one partly outside after the resize (no clipping) */
        const float xy[] = {-0.5f, -0.5f, 30, 2, 20, 35, 40, 10, 60.9f, 20, 50, 40.5f};
        const int64_t rings[] = {0, 3, 6};
        std::vector<uint8_t> out((size_t)OH * OW, 0);
        CHECK(fq_tgt_polygons(&ex, xy, rings, 2, out.data(), &err) == FQ_OK, "%s", err.msg);
        size_t on = 0;
        for (uint8_t v : out)
            on += v;
        CHECK(on > 500 && on < (size_t)OH * OW / 2, "%zu pixels set", on);
        /* the shown region of a resize + flip is the whole output; a valid plane with its
         * right half cleared keeps the polygons' left half only */
        std::vector<uint8_t> valid((size_t)OH * OW, 7), part((size_t)OH * OW, 0);
        CHECK(fq_tgt_valid(&ex, valid.data(), &err) == FQ_OK, "%s", err.msg);
        size_t shown = 0;
        for (uint8_t v : valid)
            shown += v == 1;
        CHECK(shown == (size_t)OH * OW, "%zu pixels shown", shown);
        for (int y = 0; y < OH; y++)
            std::memset(valid.data() + (size_t)y * OW + OW / 2, 0, OW - OW / 2);
        CHECK(fq_tgt_polygons_valid(&ex, xy, rings, 2, valid.data(), part.data(), &err) == FQ_OK, "%s", err.msg);
        size_t kept = 0, right = 0;
        for (int y = 0; y < OH; y++)
            for (int x = 0; x < OW; x++) {
                const size_t i = (size_t)y * OW + x;
                kept += part[i];
                right += x >= OW / 2 && part[i];
                CHECK(part[i] == (x < OW / 2 ? out[i] : 0), "pixel %d, %d", x, y);
            }
        CHECK(kept > 0 && right == 0, "%zu kept, %zu right", kept, right);
        CHECK(fq_tgt_polygons_valid(&ex, xy, rings, 2, nullptr, part.data(), &err) == FQ_E_INVALID, "NULL valid");
        CHECK(fq_tgt_valid(&ex, nullptr, &err) == FQ_E_INVALID, "NULL output");
        const float box[4] = {5, 5, 70, 60};
        std::vector<uint8_t> in_box(28 * 20, 0);
        CHECK(fq_tgt_polygons_box(&ex, xy, rings, 2, box, 28, 20, in_box.data(), &err) == FQ_OK, "%s", err.msg);
        std::vector<uint8_t> sampled(28 * 20, 0);
        fq_tgt_mask_box(out.data(), OH, OW, box, 28, 20, sampled.data());
        /* RLE: a 40 x 60 mask with one run of ones in column-major order */
        const uint32_t counts[] = {100, 500, (uint32_t)(H * W - 600)};
        CHECK(fq_tgt_rle(&ex, counts, 3, H, W, FQ_TGT_CENTER, out.data(), &err) == FQ_OK, "%s", err.msg);
        /* errors: each returns FQ_E_INVALID and leaks nothing */
        const float bad_xy[] = {NAN, 0, 5, 5, 9, 1};
        const int64_t one_ring[] = {0, 3}, two_points[] = {0, 2};
        CHECK(fq_tgt_polygons(&ex, bad_xy, one_ring, 1, out.data(), &err) == FQ_E_INVALID, "NaN");
        CHECK(fq_tgt_polygons(&ex, xy, two_points, 1, out.data(), &err) == FQ_E_INVALID, "2 points");
        const float far_xy[] = {0, 0, 500, 0, 5, 5};
        CHECK(fq_tgt_polygons(&ex, far_xy, one_ring, 1, out.data(), &err) == FQ_E_INVALID, "outside");
        const uint32_t short_counts[] = {5, 10};
        CHECK(fq_tgt_rle(&ex, short_counts, 2, H, W, FQ_TGT_CENTER, out.data(), &err) == FQ_E_INVALID, "short runs");
        const uint32_t big[] = {0xFFFFFFFFu, 0xFFFFFFFFu, 7};
        CHECK(fq_tgt_rle(&ex, big, 3, H, W, FQ_TGT_CENTER, out.data(), &err) == FQ_E_INVALID, "overflowing runs");
        CHECK(fq_tgt_rle(&ex, counts, 3, W, H, FQ_TGT_CENTER, out.data(), &err) == FQ_E_INVALID, "transposed size");
        CHECK(fq_tgt_rle(&ex, counts, 3, H, W, 2, out.data(), &err) == FQ_E_INVALID, "unknown sampling");
        /* a uint16 label map through the resize (+ flip): FQ_TGT_CENTER reads source pixel
         * min(floor((x + 0.5) * in / out), in - 1) in float32 (TF's nearest), FQ_TGT_LEGACY
         * OpenCV's INTER_NEAREST; exactness against TF and the image: tests/targets/test_mask_sampling.py */
        std::vector<uint16_t> lab((size_t)H * W), got((size_t)OH * OW), legacy((size_t)OH * OW);
        for (size_t i = 0; i < lab.size(); i++)
            lab[i] = (uint16_t)(i * 2654435761u >> 7);
        CHECK(fq_tgt_mask(&ex, lab.data(), H, W, 2, (size_t)W * 2, 65535, FQ_TGT_CENTER, got.data(), &err) == FQ_OK,
              "%s", err.msg);
        CHECK(fq_tgt_mask(&ex, lab.data(), H, W, 2, (size_t)W * 2, 65535, FQ_TGT_LEGACY, legacy.data(), &err) ==
              FQ_OK, "%s", err.msg);
        size_t wrong = 0, moved = 0;
        for (int y = 0; y < OH; y++)
            for (int x = 0; x < OW; x++) {
                const int sy = std::min((int)std::floor(((float)y + 0.5f) * ((float)H / (float)OH)), H - 1);
                const int xo = flip ? OW - 1 - x : x;
                const int sx = std::min((int)std::floor(((float)xo + 0.5f) * ((float)W / (float)OW)), W - 1);
                wrong += got[(size_t)y * OW + x] != lab[(size_t)sy * W + sx];
                moved += got[(size_t)y * OW + x] != legacy[(size_t)y * OW + x];
            }
        CHECK(wrong == 0 && moved > 0, "%zu pixels off the centre rule, %zu differ from legacy", wrong, moved);
        CHECK(fq_tgt_mask(&ex, lab.data(), H, W, 2, (size_t)W * 2, 0, -1, got.data(), &err) == FQ_E_INVALID,
              "sampling -1");
    }
    printf("test_instance_masks: %d checks, %d failed\n", g_checks, g_failed);
    return g_failed ? 1 : 0;
}
