/* fq_image_jpeg.cpp - the JPEG path of fq_img_process_encoded: read the header, plan
 * the sample, let the decoder do as much of op 0 as it can (region of interest, DCT
 * scaling; plan_decode in fq_image_plan.cpp), finish op 0 on the decoded pixels, run
 * the rest of the chain, write.  Runs on the calling thread with its scratch; the
 * decoder is left reset on every return path. */
#include "image/internal/fq_image_stages.h"

#include <opencv2/imgproc.hpp>

namespace {

using fqi::Exec;

/* Read the header into the scratch decoder and refuse empty or too-large images. */
int read_header(const fq_img_spec *sp, fq_img_scratch *s, const uint8_t *data, size_t len, fqi::SrcInfo *si,
                fq_img_explain *ex, fq_err *err)
{
    int rc = fqi::jpeg_header(s, data, len, si, err);
    if (rc)
        return rc;
    if (ex) {
        ex->src_format = FQ_FMT_JPEG;
        ex->src_h = si->h, ex->src_w = si->w, ex->src_channels = si->channels, ex->src_bits = 8;
    }
    if (si->h <= 0 || si->w <= 0) {
        fqi::jpeg_reset(s);
        return fq_set_err(err, FQ_E_DECODE, "JPEG header declares an empty image (%dx%d)", si->w, si->h);
    }
    if ((int64_t)si->h * si->w > sp->fmt.max_pixels) {
        fqi::jpeg_reset(s);
        return fq_set_err(err, FQ_E_TOO_LARGE, "JPEG image %dx%d exceeds max_pixels=%lld", si->w, si->h,
                          (long long)sp->fmt.max_pixels);
    }
    return FQ_OK;
}

/* Decode the region and scale of dp into *dec (a view of exactly dp.roi). */
int decode_region(const fq_img_spec *sp, fq_img_scratch *s, const uint8_t *data, size_t len,
                  const fqi::SrcInfo &si, const fq_img_decode_plan &dp, cv::Mat *dec, fq_img_explain *ex,
                  fq_err *err)
{
    int dh = 0, dw = 0, rc;
    const int *roi = dp.roi;
    if (dp.roi_used)
        rc = fqi::jpeg_decode_crop(s, data, len, si, dp.scale_num, sp->fmt.idct, roi[0], roi[1], roi[2], roi[3],
                                   dp.box_op ? dp.sbox : nullptr, sp->out_c, dec, &dh, &dw, err);
    else
        rc = fqi::jpeg_decode(s, si, dp.scale_num, sp->fmt.idct, 0, 0, 0, 0, sp->out_c, dec, &dh, &dw, err);
    if (rc)
        return rc;
    if (dh != dp.scaled_h || dw != dp.scaled_w)
        return fq_set_err(err, FQ_E_DECODE, "internal: JPEG scaled size %dx%d, expected %dx%d", dw, dh,
                          dp.scaled_w, dp.scaled_h);
    if (ex) {
        ex->scale_num = dp.scale_num, ex->scale_denom = 8;
        ex->decoded_h = dp.scaled_h, ex->decoded_w = dp.scaled_w;
        for (int k = 0; k < 4; k++)
            ex->roi[k] = roi[k];
        ex->roi_used = dp.roi_used;
    }
    return FQ_OK;
}

/* Finish op 0 on the decoded region dec; returns the index of the next op to run. */
int finish_first_op(const fq_img_decode_plan &dp, const cv::Mat &dec, Exec &e)
{
    e.set(dec);
    if (!dp.box_op && !dp.resize_after)
        return 0; /* op 0 runs as usual on the whole decoded image */
    const int M = dp.scale_num, rx0 = dp.roi[0], ry0 = dp.roi[1];
    if (dp.resize_after && M < 8 && dp.interp != FQ_INTERP_AREA) {
        /* DCT-scaled: map output pixel centres onto the exact (sub-pixel) box in the
         * scaled image; scaled pixel i is centred on source (i + 0.5) * 8 / M */
        const int bx = dp.box[0], by = dp.box[1], bw = dp.box[2], bh = dp.box[3];
        double ax = (double)bw * M / (8.0 * dp.out_w), ay = (double)bh * M / (8.0 * dp.out_h);
        double bxs = (bx + 0.5 * bw / dp.out_w) * M / 8.0 - 0.5 - rx0;
        double bys = (by + 0.5 * bh / dp.out_h) * M / 8.0 - 0.5 - ry0;
        double inv[6] = {ax, 0, bxs, 0, ay, bys};
        cv::Mat Mi(2, 3, CV_64F, inv);
        cv::Mat d = e.next(dp.out_h, dp.out_w, dec.type());
        cv::warpAffine(dec, d, Mi, cv::Size(dp.out_w, dp.out_h), dp.interp | cv::WARP_INVERSE_MAP,
                       cv::BORDER_REPLICATE);
        e.set(d);
        return 1;
    }
    cv::Mat view = dec(cv::Rect(dp.sbox[0] - rx0, dp.sbox[1] - ry0, dp.sbox[2], dp.sbox[3]));
    if (dp.resize_after)
        e.resize_to(view, dp.out_h, dp.out_w, dp.interp);
    else
        e.set(view);
    return 1;
}

}  // namespace

namespace fqi {

int process_jpeg(const fq_img_spec *sp, fq_img_scratch *s, const uint8_t *data, size_t len, uint64_t seed,
                 uint64_t epoch, uint64_t index, void *out_row, fq_img_explain *ex, fq_err *err)
{
    const uint64_t t_dec = fq_now_ns();
    SrcInfo si;
    int rc = read_header(sp, s, data, len, &si, ex, err);
    if (rc)
        return rc;
    Plan pl;
    rc = make_plan(sp, si.h, si.w, seed, epoch, index, &pl, err, &s->boxes);
    if (rc) {
        jpeg_reset(s);
        return rc;
    }
    fq_img_decode_plan dp;
    plan_decode(sp, pl, si.h, si.w, &dp);
    cv::Mat dec;
    rc = decode_region(sp, s, data, len, si, dp, &dec, ex, err);
    if (rc)
        return rc;
    const uint64_t t_ops = fq_now_ns();
    s->times.decode_ns = t_ops - t_dec;
    Exec e;
    e.s = s;
    e.err = err;
    int start = finish_first_op(dp, dec, e);
    exec_ops(sp, &pl, start, e);
    if (e.rc)
        return e.rc;
    const uint64_t t_write = fq_now_ns();
    write_out(sp, e.cur, e.hflip, e.vflip, out_row, pl);
    s->times.ops_ns = t_write - t_ops, s->times.write_ns = fq_now_ns() - t_write;
    fill_explain_tail(ex, pl, sp);
    return FQ_OK;
}

}  // namespace fqi
