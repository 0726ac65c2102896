/* fq_batch_mix.h - batch-level MixUp / CutMix on a finished batch, in place.
 *
 * Semantics (torchvision.transforms.v2 MixUp / CutMix, timm's Mixup arguments):
 * the partner of row i is row (i - 1) mod n (torchvision's batch.roll(1, 0)), in
 * mode pair row n - 1 - i (timm's flip).
 *   MixUp:  x_i = lam * x_i + (1 - lam) * x_{partner}
 *   CutMix: x_i[box] = x_{partner}[box], lam := 1 - box area / image area
 *           (correct_lam, or always with cutmix_minmax; else lam stays the Beta draw)
 *   labels: y_i = lam * smooth(onehot(l_i)) + (1 - lam) * smooth(onehot(l_{partner})),
 *           smooth(v) = v * (1 - s) + s / num_classes (timm's on/off values).
 * mode batch: one draw for the batch; mode elem: one draw per row (apply?, mix or
 * cut, lambda, box), partner still row i - 1; mode pair (timm): one draw per pair
 * (i, n - 1 - i), i < n / 2, shared by both rows (CutMix swaps the box between
 * them); n must be even.
 *
 * Draws: one fq_rng stream keyed (seed, epoch, FQ_MIX_RNG_INDEX(batch)), so the
 * draws are a pure function of (seed, epoch, batch index) - never of the workers,
 * the thread or a resume.  Per draw (batch: 1, elem: n, pair: n / 2, in row order),
 * in this order: u_apply (applied when u_apply < prob), u_switch (CutMix when both
 * alphas > 0 and u_switch < switch_prob; CutMix alone when only cutmix_alpha > 0),
 * then for MixUp lambda ~ Beta(a, a) (fq_mix_beta); for CutMix without minmax
 * lambda ~ Beta(a, a), r_x = below(W), r_y = below(H) (torchvision's
 * torch.randint(W) / torch.randint(H)); box (torchvision's make_params):
 * r = 0.5 * sqrt(1 - lam), half sizes int(r * W), int(r * H), clamped to the image.
 * CutMix with cutmix_minmax (lo, hi) (timm's rand_bbox_minmax, no Beta draw):
 * cut_h = int(H * lo) + below(int(H * hi) - int(H * lo)), cut_w likewise with W,
 * y0 = below(H - cut_h + 1), x0 = below(W - cut_w + 1), in this order; the box is
 * [x0, x0 + cut_w) x [y0, y0 + cut_h).  int(H * lo) < int(H * hi) and
 * int(W * lo) < int(W * hi) are required (timm's randint raises otherwise).
 *
 * Beta(a, a): X / (X + Y) with X, Y ~ Gamma(a, 1) by Marsaglia & Tsang (2000)
 * (standard normals by Box-Muller from the same uniform stream); a < 1 uses
 * Gamma(a) = Gamma(a + 1) * U^(1/a), computed in logs so that tiny a never gives 0/0.
 *
 * Rounding: float32 computes b * (1 - lam) + a * lam in float (lam rounded to float);
 * float16 / bfloat16 convert to float, compute the same, round to nearest even;
 * uint8 computes the same in float and stores floor(v + 0.5) clamped to [0, 255].
 * CutMix copies elements (exact in every dtype).
 *
 * Thread safety: pure functions; fq_mix_apply writes only the buffers it is given.
 */
#ifndef FQ_BATCH_MIX_H
#define FQ_BATCH_MIX_H

#include <stdint.h>

#include "core/fq_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fq_rng index of batch b's stream: far from every sample index and from
 * FQ_RNG_SHUFFLE_INDEX. */
#define FQ_MIX_RNG_INDEX(b) (UINT64_C(0xA5F0000000000000) ^ (uint64_t)(b))

enum fq_mix_kind { FQ_MIX_NONE = 0, FQ_MIX_MIXUP = 1, FQ_MIX_CUTMIX = 2 };
enum fq_mix_mode { FQ_MIX_BATCH = 0, FQ_MIX_ELEM = 1, FQ_MIX_PAIR = 2 };
enum fq_mix_layout { FQ_MIX_NHWC = 0, FQ_MIX_NCHW = 1 };
/* image element types (same order as fq_image.h's enum fq_dtype) */
enum fq_mix_dtype { FQ_MIX_U8 = 0, FQ_MIX_F32 = 1, FQ_MIX_F16 = 2, FQ_MIX_BF16 = 3 };
/* label element types */
enum fq_mix_ltype { FQ_MIX_L_I64 = 0, FQ_MIX_L_I32 = 1, FQ_MIX_L_U8 = 2, FQ_MIX_L_I16 = 3, FQ_MIX_L_U16 = 4,
                    FQ_MIX_L_I8 = 5, FQ_MIX_L_U32 = 6, FQ_MIX_L_U64 = 7 };

typedef struct fq_mix_params {
    double mixup_alpha;     /* >= 0; 0 disables MixUp */
    double cutmix_alpha;    /* >= 0; 0 disables CutMix; at least one > 0 */
    double switch_prob;     /* P(CutMix) when both are enabled */
    double prob;            /* P(a batch / row is mixed at all) */
    double label_smoothing; /* in [0, 1) */
    int64_t num_classes;    /* >= 1 */
    int mode;               /* enum fq_mix_mode */
    int correct_lam;        /* 1: CutMix's lambda is the area's; 0: the Beta draw (timm) */
    int minmax;             /* 1: CutMix box from cutmix_min / cutmix_max (timm's cutmix_minmax) */
    double cutmix_min, cutmix_max; /* with minmax: 0 <= min < max <= 1 */
} fq_mix_params;

typedef struct fq_mix_draw {
    int kind;          /* enum fq_mix_kind */
    double lam_drawn;  /* the Beta draw (1 when kind is NONE; NaN for a minmax box: none) */
    double lam;        /* weight of the row itself (CutMix: area-corrected unless !correct_lam) */
    int32_t x0, y0, x1, y1; /* CutMix box [x0, x1) x [y0, y1); 0 otherwise */
} fq_mix_draw;

/* Check params; FQ_E_INVALID with a message when bad. */
int fq_mix_check(const fq_mix_params *p, fq_err *err);

/* n Beta(a, a) draws (a > 0) from the stream keyed (seed, 0, 0), for tests of
 * the sampler's distribution. */
int fq_mix_beta_samples(uint64_t seed, double a, int64_t n, double *out, fq_err *err);

/* Number of draws of a batch of n rows: 1 (batch), n (elem), n / 2 (pair). */
int fq_mix_draw_count(const fq_mix_params *p, int n);

/* Fill draws[0 .. fq_mix_draw_count(p, n)) for batch `batch` (n rows, images h x w).
 * FQ_E_INVALID: mode pair with n odd, or a minmax range empty for h x w. */
int fq_mix_draw_batch(const fq_mix_params *p, uint64_t seed, uint64_t epoch, uint64_t batch, int n, int h, int w,
                      fq_mix_draw *draws, fq_err *err);

/* Mix the n rows of `images` (n x [h, w, c] or n x [c, h, w], dtype) in place with
 * `draws` (fq_mix_draw_count(p, n) of them), and write the soft labels
 * soft[n][num_classes] (float32) from the integer labels (ltype, one per row).
 * tmp: scratch of one image row's bytes.  A label outside [0, num_classes):
 * FQ_E_INVALID, err->index = its row, nothing of the images written.
 * Releases no lock and calls no Python: run it with the GIL released. */
int fq_mix_apply(const fq_mix_params *p, const fq_mix_draw *draws, void *images, int dtype, int layout, int n,
                 int h, int w, int c, const void *labels, int ltype, float *soft, void *tmp, fq_err *err);

#ifdef __cplusplus
}
#endif
#endif
