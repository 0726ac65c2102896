/* fq_image_compose.cpp - compositions of ops: RandomApply (all children or none, u < p),
 * RandomChoice (one child, drawn with the given probabilities) and RandomOrder (all
 * children in a Fisher-Yates permutation), torchvision.transforms.v2's containers.
 *
 * Encoding: the chain stays a flat array of fq_op.  A composition is one record whose first
 * parameter is n, its number of direct children; the n subtrees that follow it are its
 * children (a child may itself be a composition: nesting is allowed).  compose_tree checks
 * the structure and the size rules once (fq_img_chain_check); the spec keeps each op's
 * span and parent.  A composition's plan() draws only its own choice (one uniform for
 * RandomApply and RandomChoice, n - 1 bounded draws for RandomOrder) into n_run / run;
 * make_plan (fq_image_plan.cpp) then plans the children that run in the order they run
 * and marks the rest applied = 0 without drawing; exec_ops runs Plan::exec.
 * Pure functions of their arguments (thread-safe). */
#include "image/internal/fq_image_stages.h"

#include <cmath>
#include <cstdio>

namespace fqi {

namespace {

bool valid_n(double n) { return std::isfinite(n) && n == std::floor(n) && n >= 1 && n <= FQ_IMG_MAX_OPS - 1; }
const char *const kBadN = "the number of child ops must be an integer in [1, 15]";

}  // namespace

bool is_compose(int kind)
{
    const OpImpl *impl = op_impl(kind);
    return impl && (impl->explain & FQ_EXPLAIN_COMPOSE);
}

int compose_n(const fq_op &op) { return (int)op.raw[0]; }

const char *random_apply_check(const fq_op &op)
{
    const ComposeApply &q = params<ComposeApply>(op);
    if (!valid_n(q.n))
        return kBadN;
    return std::isfinite(q.p) && q.p >= 0 && q.p <= 1 ? nullptr : "p must be in [0, 1]";
}

const char *random_choice_check(const fq_op &op)
{
    const ComposeChoice &q = params<ComposeChoice>(op);
    if (!valid_n(q.n))
        return kBadN;
    double sum = 0;
    for (int k = 0; k < FQ_IMG_MAX_OPS - 1; k++) {
        if (!std::isfinite(q.p[k]) || q.p[k] < 0 || (k >= (int)q.n && q.p[k] != 0))
            return "p must be n probabilities >= 0 (then zeros)";
        sum += q.p[k];
    }
    return std::fabs(sum - 1.0) <= 1e-9 ? nullptr : "p must sum to 1";
}

const char *random_order_check(const fq_op &op)
{
    return valid_n(params<ComposeOrder>(op).n) ? nullptr : kBadN;
}

int random_apply_plan(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const ComposeApply &q = params<ComposeApply>(op);
    r.applied = fq_rng_uniform(rng) < q.p ? 1 : 0; /* torchvision: skip when rand >= p */
    r.n_run = r.applied ? (int)q.n : 0;
    for (int k = 0; k < r.n_run; k++)
        r.run[k] = k;
    return FQ_OK;
}

int random_choice_plan(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const ComposeChoice &q = params<ComposeChoice>(op);
    const int n = (int)q.n;
    const double u = fq_rng_uniform(rng);
    int pick = -1, last = 0;
    double cum = 0;
    for (int k = 0; k < n; k++) {
        if (q.p[k] > 0)
            last = k;
        cum += q.p[k];
        if (pick < 0 && u < cum && q.p[k] > 0)
            pick = k;
    }
    r.n_run = 1;
    r.run[0] = pick >= 0 ? pick : last; /* u above a sum rounded below 1: the last possible child */
    return FQ_OK;
}

int random_order_plan(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const int n = (int)params<ComposeOrder>(op).n;
    for (int k = 0; k < n; k++)
        r.run[k] = k;
    for (int k = n - 1; k > 0; k--) { /* Fisher-Yates, as ColorJitter draws its order */
        int j = (int)fq_rng_next_below(rng, (uint64_t)(k + 1));
        int t = r.run[k];
        r.run[k] = r.run[j];
        r.run[j] = t;
    }
    r.n_run = n;
    return FQ_OK;
}

void compose_exec(Exec &, const fq_op &, fq_img_op_explain &) {} /* its children are in Plan::exec */

namespace {

struct Tree {
    const fq_op *ops;
    int n;
    int *span, *parent, *geom, *gh, *gw;
    fq_err *err;
};

int fail_child(Tree &t, int c, int i, const char *why)
{
    return fq_set_err(t.err, FQ_E_INVALID, "op %d (%s) inside op %d (%s): %s", c, fq_img_op_name(t.ops[c].kind), i,
                      fq_img_op_name(t.ops[i].kind), why);
}

/* the subtree at i: span, parents, geometry; recursion depth <= FQ_IMG_MAX_OPS */
int subtree(Tree &t, int i, int parent)
{
    const fq_op &op = t.ops[i];
    const OpImpl *impl = op_impl(op.kind);
    t.parent[i] = parent;
    t.span[i] = 1;
    if (!is_compose(op.kind)) {
        t.gh[i] = t.gw[i] = 0;
        t.geom[i] = impl->geometry(op, &t.gh[i], &t.gw[i]);
        return FQ_OK;
    }
    const int n = compose_n(op);
    const bool choice = impl->plan == random_choice_plan;
    int c = i + 1, g = GEOM_KEEP, h = 0, w = 0;
    for (int k = 0; k < n; k++) {
        if (c >= t.n)
            return fq_set_err(t.err, FQ_E_INVALID, "op %d (%s): its %d child ops run past the end of the chain "
                              "(%d ops)", i, impl->name, n, t.n);
        if (t.ops[c].kind == FQ_OP_NORMALIZE)
            return fail_child(t, c, i, "Normalize cannot be inside a composition (it must be the last op)");
        static const int kErase = fq_img_op_kind("RandomErasing"); /* FQ_OP_NONE where it does not exist */
        if (kErase != FQ_OP_NONE && t.ops[c].kind == kErase)
            return fail_child(t, c, i, "RandomErasing cannot be inside a composition (it must be the last op)");
        int rc = subtree(t, c, i);
        if (rc)
            return rc;
        if (t.geom[c] == GEOM_VARIABLE || (!choice && t.geom[c] != GEOM_KEEP))
            return fail_child(t, c, i,
                              choice ? "changes the image size by the input size; the alternatives of RandomChoice "
                                       "must all keep the image size or all give one fixed size"
                                     : "changes the image size; the children of RandomApply and RandomOrder must "
                                       "keep the image size");
        if (k == 0) {
            g = t.geom[c], h = t.gh[c], w = t.gw[c];
        } else if (t.geom[c] != g || t.gh[c] != h || t.gw[c] != w) {
            char why[160];
            std::snprintf(why, sizeof why,
                          "gives %s but op %d gives %s; the alternatives of RandomChoice must all keep the image "
                          "size or all give one fixed size",
                          t.geom[c] == GEOM_KEEP ? "the input size" : "a fixed size", i + 1,
                          g == GEOM_KEEP ? "the input size" : "a fixed size");
            if (t.geom[c] == GEOM_FIXED && g == GEOM_FIXED)
                std::snprintf(why, sizeof why,
                              "gives %dx%d but op %d gives %dx%d; the alternatives of RandomChoice must all give "
                              "one size", t.gw[c], t.gh[c], i + 1, w, h);
            return fail_child(t, c, i, why);
        }
        t.span[i] += t.span[c];
        c += t.span[c];
    }
    t.geom[i] = g, t.gh[i] = h, t.gw[i] = w;
    return FQ_OK;
}

}  // namespace

int compose_tree(const fq_op *ops, int n, int *span, int *parent, int *geom, int *gh, int *gw, fq_err *err)
{
    Tree t{ops, n, span, parent, geom, gh, gw, err};
    for (int i = 0; i < n; i += span[i]) {
        int rc = subtree(t, i, -1);
        if (rc)
            return rc;
    }
    return FQ_OK;
}

}  // namespace fqi

/* ---- the records of this family, the compositions RandomApply / RandomChoice /
 * RandomOrder: kinds fixed forever; fq_image_op_table.cpp assembles the families */
namespace {

constexpr fqi::OpImpl kComposeRecords[] = {
    {36, "RandomApply", FQ_RULE_REFUSED, FQ_EXPLAIN_COMPOSE | FQ_EXPLAIN_APPLIED,
     FQ_PARAMS(fqi::ComposeApply, fqi::kComposeApplyFields), fqi::random_apply_check, fqi::keeps_size,
     fqi::random_apply_plan, fqi::compose_exec},
    {37, "RandomChoice", FQ_RULE_REFUSED, FQ_EXPLAIN_COMPOSE, FQ_PARAMS(fqi::ComposeChoice, fqi::kComposeChoiceFields),
     fqi::random_choice_check, fqi::keeps_size, fqi::random_choice_plan, fqi::compose_exec},
    {38, "RandomOrder", FQ_RULE_REFUSED, FQ_EXPLAIN_COMPOSE, FQ_PARAMS(fqi::ComposeOrder, fqi::kComposeOrderFields),
     fqi::random_order_check, fqi::keeps_size, fqi::random_order_plan, fqi::compose_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsCompose, kComposeRecords)
