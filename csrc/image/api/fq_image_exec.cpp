/* fq_image_exec.cpp - op execution: the ping-pong executor over the scratch buffers
 * (Exec) and the loop that runs a planned chain through the op records.  Runs on the
 * calling thread with that thread's scratch. */
#include "image/internal/fq_image_stages.h"

#include "image/internal/fq_image_resize.h"
#include "image/internal/fq_image_resize_pil.h"

#include <algorithm>

#include <opencv2/imgproc.hpp>

namespace fqi {

cv::Mat Exec::next(int h, int w, int type)
{
    Buf *b = (cur_buf == &s->a) ? &s->b : &s->a;
    return b->mat(h, w, type);
}

void Exec::set(const cv::Mat &m)
{
    cur = m;
    if (!m.empty() && m.datastart >= s->a.v.data() && m.datastart < s->a.v.data() + s->a.v.size())
        cur_buf = &s->a;
    else if (!m.empty() && m.datastart >= s->b.v.data() && m.datastart < s->b.v.data() + s->b.v.size())
        cur_buf = &s->b;
    else
        cur_buf = nullptr;
}

void Exec::materialize_flips()
{
    if (!hflip && !vflip)
        return;
    cv::Mat d = next(cur.rows, cur.cols, cur.type());
    cv::flip(cur, d, hflip && vflip ? -1 : (hflip ? 1 : 0));
    set(d);
    hflip = vflip = false;
}

void Exec::resize_to(const cv::Mat &src, int h, int w, int interp)
{
    if (src.rows == h && src.cols == w) {
        set(src);
        return;
    }
    cv::Mat d = next(h, w, src.type());
    if (is_pil_interp(interp)) { /* Pillow's resize, bit for bit (fq_image_resize_pil.cpp) */
        if (!resize_pil_u8(src, d, interp)) {
            rc = fq_set_err(err, FQ_E_UNSUPPORTED, "%s resize of a %dx%d image of type %d: only 8-bit 1 to 4 channels",
                            fq_img_interp_name(interp), src.cols, src.rows, src.type());
            return;
        }
        set(d);
        return;
    }
    /* bicubic 8-bit RGB/BGR: the AVX2 copy of cv::resize (same bytes) where it applies */
    if (interp != cv::INTER_CUBIC || !resize_cubic_u8c3(src, d))
        cv::resize(src, d, cv::Size(w, h), 0, 0, interp);
    set(d);
}

void Exec::crop_pad(const int box[4], int border, const double *fill)
{
    int x0 = box[0], y0 = box[1], x1 = box[0] + box[2], y1 = box[1] + box[3];
    if (x0 >= 0 && y0 >= 0 && x1 <= cur.cols && y1 <= cur.rows) {
        set(cur(cv::Rect(x0, y0, box[2], box[3])));
        return;
    }
    int ix0 = std::max(x0, 0), iy0 = std::max(y0, 0);
    int ix1 = std::min(x1, cur.cols), iy1 = std::min(y1, cur.rows);
    cv::Mat d = next(box[3], box[2], cur.type());
    cv::Scalar fv = fill ? cv::Scalar(fill[0], fill[1], fill[2]) : cv::Scalar::all(0);
    if (ix1 <= ix0 || iy1 <= iy0) {
        d.setTo(fv);
    } else {
        /* BORDER_ISOLATED: cur may be a view into a larger image (a crop before), whose pixels
         * OpenCV would otherwise take as the border */
        cv::copyMakeBorder(cur(cv::Rect(ix0, iy0, ix1 - ix0, iy1 - iy0)), d, iy0 - y0, y1 - iy1, ix0 - x0, x1 - ix1,
                           cv_border(border) | cv::BORDER_ISOLATED, fv);
    }
    set(d);
}

void exec_ops(const fq_img_spec *sp, Plan *pl, int start, Exec &e)
{
    /* the plain ops that run, in the order they run (compositions resolved by make_plan);
     * ops before start were done by the decoder (only op 0, never a composition); stops
     * at the first op that sets e.rc */
    e.sp = sp;
    for (int k = 0; k < pl->n_exec && e.rc == FQ_OK; k++) {
        const int i = pl->exec[k];
        if (i >= start)
            op_impl(sp->ops[i].kind)->exec(e, sp->ops[i], pl->r[i]);
    }
}

int run_full(const fq_img_spec *sp, fq_img_scratch *s, const cv::Mat &img, Plan &pl, void *out_row, fq_err *err)
{
    Exec e;
    e.s = s;
    e.err = err;
    e.set(img);
    uint64_t t0 = fq_now_ns();
    exec_ops(sp, &pl, 0, e);
    if (e.rc)
        return e.rc;
    uint64_t t1 = fq_now_ns();
    write_out(sp, e.cur, e.hflip, e.vflip, out_row, pl);
    s->times.ops_ns = t1 - t0, s->times.write_ns = fq_now_ns() - t1;
    return FQ_OK;
}

}  // namespace fqi
