/* fq_image_custom.cpp - user ops: CustomOp (a function of a shared library, ABI in
 * image/fastq_custom_op.h) and PyFunc (a Python callable, through the trampoline of
 * fastq/_native/_custom.pxi).  Both are the same thing here: a function + state held in a side
 * table of the spec (fq_img_spec.custom, by slot), loaded when the spec is created
 * (fq_img_spec_create_custom), read-only while samples run, released with the spec.
 *
 * The op's parameters are {slot, p}.  plan draws u < p and, when applied, a 64-bit key
 * from the sample's stream (explain: FQ_EXPLAIN_CUSTOM); exec starts the op's own
 * stream (fq_custom_rng) at that key, so the function's draws are a pure function of
 * (seed, epoch, index) and do not shift the draws of the ops after it.  exec runs the
 * function in place on the current image (copied into a scratch buffer first when the
 * image is not in one) and reports a non-zero return through Exec's error channel. */
#include "image/fastq_custom_op.h"
#include "image/internal/fq_image_aug.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

/* One bound user function (the spec's side table). */
struct fq_img_custom_slot {
    fq_custom_op_fn fn = nullptr;
    void *state = nullptr;
    void (*release)(void *state) = nullptr; /* NAME_free, or the binding's release */
    void *handle = nullptr;                 /* dlopen handle (nullptr: direct function) */
    bool has_state = false;                 /* release(state) is owed */
    std::vector<double> params;
    std::string name; /* for messages: "NAME (library)" or the binding's name */
};

namespace {

static_assert(sizeof(fq_custom_op_fn) == sizeof(&fq_rng_next_u64), "function pointers");

using fqi::AugCustom;

/* ---- the op's random stream ------------------------------------------------------ */

uint64_t rng_next_u64(fq_custom_rng *r)
{
    fq_rng g{r->priv[0]};
    uint64_t v = fq_rng_next_u64(&g);
    r->priv[0] = g.state;
    return v;
}

double rng_uniform(fq_custom_rng *r)
{
    fq_rng g{r->priv[0]};
    double v = fq_rng_uniform(&g);
    r->priv[0] = g.state;
    return v;
}

/* ---- loading --------------------------------------------------------------------- */

void release_slot(fq_img_custom_slot &c)
{
    if (c.has_state && c.release)
        c.release(c.state);
    c.has_state = false;
    if (c.handle)
        dlclose(c.handle);
    c.handle = nullptr;
}

template <class F>
F sym(void *h, const std::string &name)
{
    void *p = dlsym(h, name.c_str());
    F f;
    std::memcpy(&f, &p, sizeof f); /* object pointer -> function pointer (POSIX) */
    return p ? f : nullptr;
}

/* dlopen library and find symbol with a matching ABI; *handle is open on success. */
int open_checked(const char *library, const char *symbol, void **handle, fq_custom_op_fn *fn, fq_err *err)
{
    *handle = nullptr;
    if (!library || !*library || !symbol || !*symbol)
        return fq_set_err(err, FQ_E_INVALID, "CustomOp: library and symbol must be non-empty");
    dlerror();
    void *h = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return fq_set_err(err, FQ_E_INVALID, "CustomOp: cannot load library '%s': %s", library, why ? why : "?");
    }
    const std::string s = symbol;
    *fn = sym<fq_custom_op_fn>(h, s);
    if (!*fn) {
        dlclose(h);
        return fq_set_err(err, FQ_E_INVALID, "CustomOp: library '%s' has no symbol '%s'", library, symbol);
    }
    auto abi = sym<fq_custom_op_abi_fn>(h, s + "_abi_version");
    if (!abi) {
        dlclose(h);
        return fq_set_err(err, FQ_E_INVALID,
                          "CustomOp: library '%s' has no symbol '%s_abi_version' (write "
                          "FASTQ_CUSTOM_OP_DECLARE_ABI(%s) once, from fastq_custom_op.h)",
                          library, symbol, symbol);
    }
    unsigned v = abi();
    if (v != FASTQ_CUSTOM_OP_ABI_VERSION) {
        dlclose(h);
        return fq_set_err(err, FQ_E_INVALID,
                          "CustomOp: '%s' in library '%s' was built for custom-op ABI version %u, this fastq has "
                          "version %u: rebuild it against fastq.get_include()",
                          symbol, library, v, (unsigned)FASTQ_CUSTOM_OP_ABI_VERSION);
    }
    *handle = h;
    return FQ_OK;
}

int load_library(const fq_img_custom_def &d, fq_img_custom_slot &c, fq_err *err)
{
    int rc = open_checked(d.library, d.symbol, &c.handle, &c.fn, err);
    if (rc)
        return rc;
    const std::string s = d.symbol;
    c.name = s + " (" + d.library + ")";
    auto init = sym<fq_custom_op_init_fn>(c.handle, s + "_init");
    c.release = sym<fq_custom_op_free_fn>(c.handle, s + "_free");
    if (init) {
        char msg[256] = {0};
        int irc = init(c.params.data(), (int)c.params.size(), &c.state, msg, sizeof msg);
        msg[sizeof msg - 1] = 0;
        if (irc)
            return fq_set_err(err, FQ_E_INVALID, "CustomOp: %s_init in library '%s' failed (return %d): %s", d.symbol,
                              d.library, irc, msg[0] ? msg : "(no message)");
        c.has_state = true;
    } else {
        c.has_state = c.release != nullptr; /* NAME_free(NULL) still runs when given */
    }
    return FQ_OK;
}

bool is_custom_kind(int kind)
{
    const fqi::OpImpl *impl = fqi::op_impl(kind);
    return impl && impl->exec == fqi::custom_exec;
}

}  // namespace

namespace fqi {

const char *custom_check(const fq_op &op)
{
    const AugCustom &q = params<AugCustom>(op);
    if (!(aug_is_int(q.slot) && q.slot >= 0 && q.slot < 1024))
        return "slot must be an integer in [0, 1024)";
    return aug_valid_prob(q.p) ? nullptr : "p must be in [0, 1]";
}

int custom_plan(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    r.applied = fq_rng_uniform(rng) < params<AugCustom>(op).p ? 1 : 0;
    if (r.applied) {
        const uint64_t key = fq_rng_next_u64(rng);
        r.params[0] = (double)(key >> 32), r.params[1] = (double)(key & 0xFFFFFFFFu);
    }
    return FQ_OK;
}

void custom_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    const fq_img_custom_slot &c = e.sp->custom[(int)params<AugCustom>(op).slot]; /* checked by custom_bind */
    e.materialize_flips();
    if (!e.cur_buf) { /* not ours to write (the caller's array, the decoder's output) */
        cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
        e.cur.copyTo(d);
        e.set(d);
    }
    fq_custom_rng g;
    std::memset(&g, 0, sizeof g);
    g.abi_version = FASTQ_CUSTOM_OP_ABI_VERSION;
    g.next_u64 = rng_next_u64;
    g.uniform = rng_uniform;
    g.priv[0] = ((uint64_t)r.params[0] << 32) | (uint64_t)r.params[1];
    char msg[FQ_ERR_MSG_LEN];
    msg[0] = 0;
    int rc = c.fn(c.state, e.cur.data, e.cur.rows, e.cur.cols, e.cur.channels(), e.cur.step[0], c.params.data(),
                  (int)c.params.size(), &g, msg, sizeof msg);
    if (rc) {
        msg[sizeof msg - 1] = 0;
        e.rc = fq_set_err(e.err, FQ_E_INVALID, "%s failed (return %d): %s", c.name.c_str(), rc,
                          msg[0] ? msg : "(no message)");
    }
}

int custom_bind(fq_img_spec *sp, const fq_img_custom_def *custom, int n_custom, fq_err *err)
{
    if (n_custom < 0 || (n_custom > 0 && !custom))
        return fq_set_err(err, FQ_E_INVALID, "fq_img_spec_create_custom: bad custom table");
    /* every slot takes what its def hands over first, so that any failure below releases it */
    fq_img_custom_slot *slots = n_custom ? new (std::nothrow) fq_img_custom_slot[n_custom] : nullptr;
    for (int i = 0; i < n_custom; i++) {
        const fq_img_custom_def &d = custom[i];
        if (!d.library && slots) {
            slots[i].fn = d.fn, slots[i].state = d.state, slots[i].release = d.release;
            slots[i].has_state = d.release != nullptr;
            slots[i].name = d.name ? d.name : "custom op";
        } else if (!d.library && d.release) {
            d.release(d.state);
        }
    }
    auto fail = [&](int rc) {
        for (int i = 0; slots && i < n_custom; i++)
            release_slot(slots[i]);
        delete[] slots;
        return rc;
    };
    if (!sp)
        return fail(FQ_OK);
    if (n_custom && !slots)
        return fail(fq_set_err(err, FQ_E_NOMEM, "out of memory"));
    try {
        for (int i = 0; i < n_custom; i++) {
            const fq_img_custom_def &d = custom[i];
            if (d.n_params < 0 || (d.n_params > 0 && !d.params))
                return fail(fq_set_err(err, FQ_E_INVALID, "custom op %d: bad params", i));
            slots[i].params.assign(d.params, d.params + d.n_params);
            if (d.library) {
                if (int rc = load_library(d, slots[i], err))
                    return fail(rc);
            } else if (!d.fn) {
                return fail(fq_set_err(err, FQ_E_INVALID, "custom op %d: neither a library nor a function", i));
            }
        }
    } catch (const std::bad_alloc &) {
        return fail(fq_set_err(err, FQ_E_NOMEM, "out of memory"));
    }
    for (int i = 0; i < sp->n_ops; i++) {
        const fq_op &op = sp->ops[i];
        if (!is_custom_kind(op.kind))
            continue;
        const int slot = (int)params<AugCustom>(op).slot;
        if (slot >= n_custom)
            return fail(fq_set_err(err, FQ_E_INVALID,
                                   "op %d (%s): no function bound to slot %d (%d bound): CustomOp and PyFunc run "
                                   "only in specs built from their op objects (fastq.ops.compile_ops -> "
                                   "ImageSpec / Pipeline), not from packed ops alone",
                                   i, op_impl(op.kind)->name, slot, n_custom));
    }
    sp->custom = slots, sp->n_custom = n_custom;
    return FQ_OK;
}

void custom_release(fq_img_spec *sp)
{
    for (int i = 0; i < sp->n_custom; i++)
        release_slot(sp->custom[i]);
    delete[] sp->custom;
    sp->custom = nullptr, sp->n_custom = 0;
}

}  // namespace fqi

extern "C" int fq_img_custom_probe(const char *library, const char *symbol, fq_err *err)
{
    void *h = nullptr;
    fq_custom_op_fn fn = nullptr;
    int rc = open_checked(library, symbol, &h, &fn, err);
    if (h)
        dlclose(h);
    return rc;
}

/* ---- the records of this family, CustomOp / PyFunc: kinds fixed forever;
 * fq_image_op_table.cpp assembles the families */
namespace {

constexpr fqi::OpImpl kCustomRecords[] = {
    {34, "CustomOp", FQ_RULE_REFUSED, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_CUSTOM,
     FQ_PARAMS(fqi::AugCustom, fqi::kCustomFields), fqi::custom_check, fqi::keeps_size, fqi::custom_plan,
     fqi::custom_exec},
    {35, "PyFunc", FQ_RULE_REFUSED, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_CUSTOM,
     FQ_PARAMS(fqi::AugCustom, fqi::kCustomFields), fqi::custom_check, fqi::keeps_size, fqi::custom_plan,
     fqi::custom_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsCustom, kCustomRecords)
