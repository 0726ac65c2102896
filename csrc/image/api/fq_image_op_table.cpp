/* fq_image_op_table.cpp - the central op table: every family's records (FQ_OP_FAMILY, each
 * in its own source) assembled by kind, with the check that the kinds of all families
 * together are 1 .. op_count(), each once, and the names unique.  fq_img_op_* (the public
 * descriptors, fq_image_spec.cpp) and every stage look records up here. */
#include "image/internal/fq_image_stages.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

/* the families (a new family: its FQ_OP_FAMILY in its source, a line here and its extern
 * in fq_image_stages.h; a new op in a family: its record only) */
const fqi::OpFamily *const kFamilies[] = {
    &fqi::kOpsTorchvision,
    &fqi::kOpsAug,
    &fqi::kOpsGeom,
    &fqi::kOpsLut,
    &fqi::kOpsBlur,
    &fqi::kOpsPolicy,
    &fqi::kOpsErase,
    &fqi::kOpsCustom,
    &fqi::kOpsCompose,
    &fqi::kOpsDet,
    &fqi::kOpsIouCrop,
    &fqi::kOpsTensorpack,
    &fqi::kOpsNoise,
    &fqi::kOpsModelGarden,
    &fqi::kOpsTimm,
    &fqi::kOpsKerasGeom,
    &fqi::kOpsKerasColor,
};

struct Table {
    std::vector<const fqi::OpImpl *> impl; /* by kind; [0] unused */
    std::vector<fq_op_desc> desc;
};

[[noreturn]] void table_broken(const char *family, const fqi::OpImpl &r, const char *why)
{
    std::fprintf(stderr, "fastq: op table: kind %d (%s) of %s %s\n", r.kind, r.name, family, why);
    std::abort();
}

/* Kinds of all families together must be 1 .. n, each once, names unique: a broken
 * table is a build error of this library, reported at first use (like a static_assert) */
Table build_table()
{
    int n = 0;
    for (const fqi::OpFamily *f : kFamilies)
        n += f->n;
    Table t;
    t.impl.assign((size_t)n + 1, nullptr);
    t.desc.assign((size_t)n + 1, fq_op_desc{});
    for (const fqi::OpFamily *f : kFamilies)
        for (int i = 0; i < f->n; i++) {
            const fqi::OpImpl &r = f->ops[i];
            if (r.kind < 1 || r.kind > n)
                table_broken(f->name, r, "is outside 1 .. op_count(): kinds must stay dense");
            if (t.impl[(size_t)r.kind])
                table_broken(f->name, r, "is taken twice");
            for (int k = 1; k <= n; k++)
                if (t.impl[(size_t)k] && std::strcmp(t.impl[(size_t)k]->name, r.name) == 0)
                    table_broken(f->name, r, "has a name taken by another kind");
            t.impl[(size_t)r.kind] = &r;
            t.desc[(size_t)r.kind] = fq_op_desc{r.kind, r.name, r.params_size, r.n_fields, r.fields};
        }
    return t;
}

const Table &table()
{
    static const Table t = build_table(); /* thread-safe, once */
    return t;
}

}  // namespace

namespace fqi {

const OpImpl *op_impl(int kind)
{
    const Table &t = table();
    return kind > FQ_OP_NONE && (size_t)kind < t.impl.size() ? t.impl[(size_t)kind] : nullptr;
}

int op_count() { return (int)table().impl.size() - 1; }

const fq_op_desc *op_desc(int kind)
{
    const Table &t = table();
    return kind > FQ_OP_NONE && (size_t)kind < t.desc.size() ? &t.desc[(size_t)kind] : nullptr;
}

}  // namespace fqi
