/* fq_tf_kernel.cc - the TensorFlow op FastqDecodeAugment: fastq's decode + op chain on a
 * batch of encoded images, as a native kernel that a tf.data graph can carry (tf.function,
 * Dataset.map, tf.data service workers in other processes, Dataset.save/load, iterator
 * checkpoints).
 *
 * Built on the user's machine against the installed TensorFlow (fastq/tf/ops.py: the
 * compile flags of tf.sysconfig, a cache keyed by TF version + flags + sources), with TF's
 * headers and fastq's plain C headers only.  It reaches fastq's image code through the
 * versioned table of fq_capi.h, exported by the fastq._native._image extension module: the Python
 * loader calls fastq_tf_bind(<path of fastq._native._image>) once after tf.load_op_library, which
 * finds the table with dlopen(RTLD_NOLOAD) + dlsym and checks its ABI.
 *
 * Two sources (attr `source`): "bytes", input 0 holds each row's encoded image (read
 * upstream, e.g. tf.io.read_file or a TFRecord parser); "files", input 0 holds each row's
 * file path and the pool thread reads the file itself with the FILES source's reader
 * (fq_read_file through the table) - no per-file tf.data element, no tstring copy.
 *
 * Determinism: row r of the output is fq_img_process_encoded(<row r's bytes>, seed, epoch,
 * index[r]) - exactly what a fastq Pipeline writes for dataset index index[r] in that epoch
 * (same spec, same function, same OpenCV instance) - whatever thread runs it.
 *
 * Threads: each kernel instance owns a pool of num_threads native threads (created at its
 * first batch, joined by its destructor; TF destroys a kernel only when no call is in
 * flight).  Each pool thread owns one fq_img_scratch and one file buffer for its whole life.  The kernel is
 * asynchronous: ComputeAsync queues one task per row and returns; the thread that
 * finishes the last row sets the status and calls done().  Concurrent calls (Dataset.map
 * with num_parallel_calls) share the pool FIFO.  The fq_img_spec is built in the
 * constructor, immutable, shared by all rows, freed by the destructor.
 *
 * Buffer lifetime: the encoded strings (or paths) are read from the input tensor, which TF
 * keeps alive until done() is called; a file's bytes live in the reading thread's buffer
 * (grown with realloc, freed with the thread); rows are written straight into the output
 * tensor.
 */
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/logging.h"

#include "image/fq_capi.h"
#include "tf/fq_tf_dataset.h"

using namespace tensorflow;  // NOLINT: the op-registration macros expect it

namespace {

/* absl::Status builders (TF's errors:: helpers are deprecated in favour of these) */
template <typename... A>
absl::Status Invalid(const A &...a) { return absl::InvalidArgumentError(absl::StrCat(a...)); }
template <typename... A>
absl::Status Exhausted(const A &...a) { return absl::ResourceExhaustedError(absl::StrCat(a...)); }

/* ---- the bound C API ------------------------------------------------------ */

std::atomic<const fq_capi_v1 *> g_capi{nullptr};

const char *const kNotBound =
    "fastq's C API is not bound in this process: the FastqDecodeAugment kernel library was "
    "loaded without fastq.tf.ops.load() (call fastq.tf.ops.load(), or import fastq.tf.ops, "
    "in every process that runs the op: trainer and tf.data service workers; "
    "`fastq serve-worker` does it)";

/* ---- a FIFO pool of native threads, one scratch and file buffer each ------ */

/* What one pool thread owns; a task gets its thread's. */
struct Worker {
    fq_img_scratch *scratch = nullptr;  // NULL: each task reports FQ_E_NOMEM
    uint8_t *buf = nullptr;             // file mode: the last file read (api->read_file grows it)
    size_t cap = 0;
};

class Pool {
  public:
    using Task = std::function<void(Worker &)>;

    Pool(const fq_capi_v1 *api, int n) : api_(api), n_(n) {}

    ~Pool()
    {
        {
            std::lock_guard<std::mutex> g(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto &t : threads_)
            t.join();
    }

    /* Start the threads; false (and a message) if one could not be created. */
    bool start(std::string *why)
    {
        std::lock_guard<std::mutex> g(mu_);
        if (!threads_.empty())
            return true;
        try {
            for (int i = 0; i < n_; i++)
                threads_.emplace_back([this] { run(); });
        } catch (const std::exception &e) {
            *why = std::string("cannot start a fastq kernel thread: ") + e.what();
            if (threads_.empty())
                return false;  // the threads already started serve the queue
        }
        return true;
    }

    void submit(std::vector<Task> &&tasks)
    {
        {
            std::lock_guard<std::mutex> g(mu_);
            for (auto &t : tasks)
                q_.push_back(std::move(t));
        }
        cv_.notify_all();
    }

  private:
    void run()
    {
        Worker w;
        w.scratch = api_->scratch_new();
        for (;;) {
            Task t;
            {
                std::unique_lock<std::mutex> g(mu_);
                cv_.wait(g, [this] { return stop_ || !q_.empty(); });
                if (q_.empty())
                    break;  // stop_ and nothing left
                t = std::move(q_.front());
                q_.pop_front();
            }
            t(w);
        }
        api_->scratch_free(w.scratch);
        api_->buf_free(w.buf);
    }

    const fq_capi_v1 *api_;
    const int n_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Task> q_;
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

int default_threads()
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    unsigned n = std::thread::hardware_concurrency();
    return n ? (int)n : 1;
}

int dtype_code(DataType t)
{
    switch (t) {
    case DT_UINT8: return FQ_DT_UINT8;
    case DT_FLOAT: return FQ_DT_FLOAT32;
    case DT_HALF: return FQ_DT_FLOAT16;
    case DT_BFLOAT16: return FQ_DT_BFLOAT16;
    default: return -1;
    }
}

/* One batch in flight: what the last row needs to finish it. */
struct Batch {
    OpKernelContext *ctx;
    AsyncOpKernel::DoneCallback done;
    bool skip;
    std::atomic<int64_t> remaining{0};
    std::vector<fq_err> errs;  // one per row; row r written only by the thread that ran it
    bool *ok = nullptr;
    std::atomic<int64_t> *skipped_total = nullptr;
    const char *who = "";  // the Python function's name, for messages
};

}  // namespace

const fq_capi_v1 *fastq_tf_image_api() { return g_capi.load(std::memory_order_acquire); }

/* Called once by fastq.tf.ops after tf.load_op_library (through ctypes): find the table
 * in the already loaded fastq._native._image module and check that it matches the headers this
 * library was compiled with.  0 on success; otherwise -1 and a message in msg. */
extern "C" __attribute__((visibility("default"))) int fastq_tf_bind(const char *image_so, char *msg, size_t msglen)
{
    if (!image_so || !msg || msglen == 0)
        return -1;
    void *h = dlopen(image_so, RTLD_NOLOAD | RTLD_NOW);
    if (!h) {
        const char *e = dlerror();
        std::snprintf(msg, msglen, "fastq._native._image (%s) is not loaded in this process (%s): import fastq._native._image first",
                      image_so, e ? e : "dlopen RTLD_NOLOAD failed");
        return -1;
    }
    const fq_capi_v1 *api = static_cast<const fq_capi_v1 *>(dlsym(h, FQ_CAPI_SYMBOL));
    if (dlclose(h) != 0) {  // drop the reference RTLD_NOLOAD took; the module stays loaded
        std::snprintf(msg, msglen, "dlclose of %s failed", image_so);
        return -1;
    }
    if (!api) {
        std::snprintf(msg, msglen, "%s does not export %s: this fastq build predates the TensorFlow kernel; "
                      "rebuild or reinstall fastq", image_so, FQ_CAPI_SYMBOL);
        return -1;
    }
    if (api->abi_version != FQ_CAPI_ABI_VERSION || api->struct_size < sizeof(fq_capi_v1) ||
        api->sizeof_fq_op != sizeof(fq_op) || api->sizeof_fq_err != sizeof(fq_err) ||
        api->sizeof_fq_img_format != sizeof(fq_img_format) || api->max_ops != FQ_IMG_MAX_OPS) {
        std::snprintf(msg, msglen,
                      "fastq C API mismatch between %s (abi %u, table %u bytes, fq_op %u, fq_err %u, format %u) "
                      "and the kernel (abi %u, table %zu, fq_op %zu, fq_err %zu, format %zu): the kernel cache is "
                      "stale; delete it (fastq.tf.ops.cache_dir()) and load again",
                      image_so, api->abi_version, api->struct_size, api->sizeof_fq_op, api->sizeof_fq_err,
                      api->sizeof_fq_img_format, FQ_CAPI_ABI_VERSION, sizeof(fq_capi_v1), sizeof(fq_op),
                      sizeof(fq_err), sizeof(fq_img_format));
        return -1;
    }
    g_capi.store(api, std::memory_order_release);
    msg[0] = 0;
    return 0;
}

REGISTER_OP("FastqDecodeAugment")
    .Input("encoded: string")
    .Input("index: int64")
    .Input("epoch: int64")
    .Output("images: out_type")
    .Output("ok: bool")
    .Attr("ops: string")
    .Attr("seed: int >= 0")
    .Attr("out_size: list(int) >= 2")
    .Attr("out_type: {uint8, float, half, bfloat16} = DT_UINT8")
    .Attr("channels: int = 3")
    .Attr("layout: {'NHWC', 'NCHW'} = 'NHWC'")
    .Attr("max_pixels: int = 0")
    .Attr("dct_scaling: bool = true")
    .Attr("on_error: {'raise', 'skip'} = 'raise'")
    .Attr("num_threads: int >= 0 = 0")
    .Attr("channel_order: {'RGB', 'BGR'} = 'RGB'")
    .Attr("source: {'bytes', 'files'} = 'bytes'")
    .Attr("idct: {'accurate', 'fast'} = 'accurate'")
    .SetShapeFn([](shape_inference::InferenceContext *c) {
        shape_inference::ShapeHandle enc, idx, ep;
        TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &enc));
        TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &idx));
        TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 0, &ep));
        shape_inference::DimensionHandle b;
        TF_RETURN_IF_ERROR(c->Merge(c->Dim(enc, 0), c->Dim(idx, 0), &b));
        std::vector<int64_t> size;
        TF_RETURN_IF_ERROR(c->GetAttr("out_size", &size));
        int64_t ch;
        TF_RETURN_IF_ERROR(c->GetAttr("channels", &ch));
        std::string layout;
        TF_RETURN_IF_ERROR(c->GetAttr("layout", &layout));
        if (size.size() != 2)
            return Invalid("out_size must be [height, width]");
        if (layout == "NHWC")
            c->set_output(0, c->MakeShape({b, c->MakeDim(size[0]), c->MakeDim(size[1]), c->MakeDim(ch)}));
        else
            c->set_output(0, c->MakeShape({b, c->MakeDim(ch), c->MakeDim(size[0]), c->MakeDim(size[1])}));
        c->set_output(1, c->Vector(b));
        return absl::OkStatus();
    })
    .Doc(R"doc(
fastq's decode + op chain on a batch of encoded images (source "bytes", see
fastq.tf.ops.decode_augment) or of image files it reads itself (source "files", input 0
holds paths; see fastq.tf.ops.decode_augment_files).
Row r = the fastq Pipeline's sample for (seed, epoch, index[r]).
)doc");

class FastqDecodeAugmentOp : public AsyncOpKernel {
  public:
    explicit FastqDecodeAugmentOp(OpKernelConstruction *c) : AsyncOpKernel(c)
    {
        api_ = g_capi.load(std::memory_order_acquire);
        OP_REQUIRES(c, api_ != nullptr, absl::FailedPreconditionError(kNotBound));
        std::string ops, layout, on_error;
        std::vector<int64_t> out_size;
        int64_t seed, channels, max_pixels, num_threads;
        bool dct;
        DataType out_type;
        OP_REQUIRES_OK(c, c->GetAttr("ops", &ops));
        OP_REQUIRES_OK(c, c->GetAttr("seed", &seed));
        OP_REQUIRES_OK(c, c->GetAttr("out_size", &out_size));
        OP_REQUIRES_OK(c, c->GetAttr("out_type", &out_type));
        OP_REQUIRES_OK(c, c->GetAttr("channels", &channels));
        OP_REQUIRES_OK(c, c->GetAttr("layout", &layout));
        OP_REQUIRES_OK(c, c->GetAttr("max_pixels", &max_pixels));
        OP_REQUIRES_OK(c, c->GetAttr("dct_scaling", &dct));
        OP_REQUIRES_OK(c, c->GetAttr("on_error", &on_error));
        OP_REQUIRES_OK(c, c->GetAttr("num_threads", &num_threads));
        std::string channel_order, source, idct;
        OP_REQUIRES_OK(c, c->GetAttr("channel_order", &channel_order));
        OP_REQUIRES_OK(c, c->GetAttr("idct", &idct));
        OP_REQUIRES_OK(c, c->GetAttr("source", &source));
        files_ = source == "files";
        who_ = files_ ? "fastq.decode_augment_files" : "fastq.decode_augment";
        OP_REQUIRES(c, channel_order == "RGB" || channels == 3,
                    Invalid("FastqDecodeAugment: channel_order BGR needs channels 3"));
        OP_REQUIRES(c, ops.size() % sizeof(fq_op) == 0 && ops.size() / sizeof(fq_op) <= FQ_IMG_MAX_OPS,
                    Invalid("FastqDecodeAugment: attr ops must be a packed array of at most ",
                                            FQ_IMG_MAX_OPS, " fq_op records of ", sizeof(fq_op),
                                            " bytes (fastq.ops.compile_ops(...).packed_ops), got ", ops.size(),
                                            " bytes"));
        OP_REQUIRES(c, channels == 1 || channels == 3,
                    Invalid("FastqDecodeAugment: channels must be 1 or 3, got ", channels));
        OP_REQUIRES(c, num_threads <= 1024,
                    Invalid("FastqDecodeAugment: num_threads must be <= 1024, got ", num_threads));
        seed_ = (uint64_t)seed;
        skip_ = on_error == "skip";
        nhwc_ = layout == "NHWC";
        threads_ = num_threads > 0 ? (int)num_threads : default_threads();
        // an aligned copy: the attr's bytes have no alignment guarantee for doubles
        std::vector<fq_op> packed(ops.size() / sizeof(fq_op));
        if (!packed.empty())
            std::memcpy(packed.data(), ops.data(), ops.size());
        fq_img_format fmt;
        std::memset(&fmt, 0, sizeof fmt);
        fmt.channels = (int)channels;
        fmt.dtype = dtype_code(out_type);
        fmt.layout = nhwc_ ? FQ_LAYOUT_HWC : FQ_LAYOUT_CHW;
        fmt.max_pixels = max_pixels;
        fmt.dct_scaling = dct ? 1 : 0;
        fmt.channel_order = channel_order == "BGR" ? FQ_ORDER_BGR : FQ_ORDER_RGB;
        fmt.idct = idct == "fast" ? FQ_IDCT_FAST : FQ_IDCT_ACCURATE;
        fq_err err;
        std::memset(&err, 0, sizeof err);
        fq_img_spec *spec = nullptr;
        int rc = api_->spec_create(packed.data(), (int)packed.size(), &fmt, &spec, &err);
        OP_REQUIRES(c, rc == FQ_OK,
                    Invalid("FastqDecodeAugment: invalid op chain: ", err.msg, " (",
                                            api_->code_name(rc), ")"));
        spec_ = spec;
        int h = 0, w = 0, ch = 0;
        OP_REQUIRES(c, api_->spec_out_shape(spec_, &h, &w, &ch) == FQ_OK,
                    absl::InternalError("FastqDecodeAugment: fq_img_spec_out_shape failed"));
        OP_REQUIRES(c, out_size.size() == 2 && out_size[0] == h && out_size[1] == w && ch == channels,
                    Invalid("FastqDecodeAugment: attr out_size [", out_size.size() > 0 ? out_size[0] : -1,
                                            ", ", out_size.size() > 1 ? out_size[1] : -1,
                                            "] does not match the op chain's output ", h, "x", w));
        h_ = h, w_ = w, c_ = ch;
        row_bytes_ = api_->spec_row_bytes(spec_);
    }

    ~FastqDecodeAugmentOp() override
    {
        pool_.reset();  // joins the threads: no row runs after this
        if (spec_)
            api_->spec_free(spec_);
    }

    void ComputeAsync(OpKernelContext *ctx, DoneCallback done) override
    {
        const Tensor &encoded = ctx->input(0);
        const Tensor &index = ctx->input(1);
        const Tensor &epoch_t = ctx->input(2);
        OP_REQUIRES_ASYNC(ctx, TensorShapeUtils::IsVector(encoded.shape()),
                          Invalid(who_, ": ", files_ ? "paths" : "encoded", " must be a 1-D string tensor "
                                                  "(a batch), got shape ", encoded.shape().DebugString()),
                          done);
        OP_REQUIRES_ASYNC(ctx, TensorShapeUtils::IsVector(index.shape()) && index.dim_size(0) == encoded.dim_size(0),
                          Invalid(who_, ": index must be a 1-D int64 tensor as long "
                                                  "as ", files_ ? "paths" : "encoded", " (", encoded.dim_size(0), "), got shape ",
                                                  index.shape().DebugString()),
                          done);
        OP_REQUIRES_ASYNC(ctx, TensorShapeUtils::IsScalar(epoch_t.shape()),
                          Invalid(who_, ": epoch must be a scalar, got shape ",
                                                  epoch_t.shape().DebugString()),
                          done);
        const int64_t epoch = epoch_t.scalar<int64_t>()();
        OP_REQUIRES_ASYNC(ctx, epoch >= 0,
                          Invalid(who_, ": epoch must be >= 0, got ", epoch), done);
        const int64_t n = encoded.dim_size(0);
        auto idx = index.flat<int64_t>();
        for (int64_t r = 0; r < n; r++)
            OP_REQUIRES_ASYNC(ctx, idx(r) >= 0,
                              Invalid(who_, ": index[", r, "] = ", idx(r),
                                                      " is negative (sample indices are >= 0)"),
                              done);
        if (files_) {
            /* A URL is a usage error, not a bad sample: refused whatever on_error says. */
            auto paths = encoded.flat<tstring>();
            for (int64_t r = 0; r < n; r++)
                OP_REQUIRES_ASYNC(ctx, !is_url(paths(r)),
                                  Invalid(who_, ": paths[", r, "] = '", std::string(paths(r)).substr(0, 200),
                                          "' is a URL; this op reads local files only. Read objects with a "
                                          "fastq source (fastq.sources.Files / Folder / TFRecord / WebDataset "
                                          "take s3://, gs://, az://, http(s)://) and fastq.tf.dataset, or fetch "
                                          "the bytes (tf.io.read_file) and use fastq.tf.ops.decode_augment; "
                                          "see docs/cloud.md"),
                                  done);
        }
        TensorShape shape = nhwc_ ? TensorShape({n, h_, w_, c_}) : TensorShape({n, c_, h_, w_});
        Tensor *images = nullptr, *ok = nullptr;
        OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(0, shape, &images), done);
        OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(1, TensorShape({n}), &ok), done);
        if (n == 0) {
            done();
            return;
        }
        {
            std::lock_guard<std::mutex> g(pool_mu_);
            if (!pool_) {
                std::unique_ptr<Pool> p(new Pool(api_, threads_));
                std::string why;
                OP_REQUIRES_ASYNC(ctx, p->start(&why), Exhausted(why), done);
                pool_ = std::move(p);
            }
        }
        // the output tensor's buffer, just allocated for this call (TF exposes it read-only)
        uint8_t *base = reinterpret_cast<uint8_t *>(const_cast<char *>(images->tensor_data().data()));
        auto batch = std::make_shared<Batch>();
        batch->ctx = ctx;
        batch->done = std::move(done);
        batch->skip = skip_;
        batch->remaining.store(n);
        batch->errs.resize(n);
        batch->ok = ok->flat<bool>().data();
        batch->skipped_total = &skipped_;
        batch->who = who_;
        const bool files = files_;
        const fq_capi_v1 *api = api_;
        const fq_img_spec *spec = spec_;
        const size_t rb = row_bytes_;
        const uint64_t seed = seed_;
        std::vector<Pool::Task> tasks;
        tasks.reserve(n);
        for (int64_t r = 0; r < n; r++) {
            tasks.emplace_back([batch, api, spec, rb, seed, epoch, base, r, files, &encoded, &index](Worker &w) {
                fq_err &e = batch->errs[r];
                std::memset(&e, 0, sizeof e);
                const tstring &data = encoded.flat<tstring>()(r);
                const int64_t i = index.flat<int64_t>()(r);
                uint8_t *row = base + (size_t)r * rb;
                int rc = FQ_E_NOMEM;
                if (!w.scratch)
                    std::snprintf(e.msg, sizeof e.msg, "no per-thread scratch (out of memory)");
                else if (!files)
                    rc = api->process_encoded(spec, w.scratch, reinterpret_cast<const uint8_t *>(data.data()),
                                              data.size(), seed, (uint64_t)epoch, (uint64_t)i, row, nullptr, &e);
                else
                    rc = read_and_process(api, spec, w, std::string(data.data(), data.size()), seed, epoch, i, row,
                                          &e);
                e.code = rc;
                if (rc != FQ_OK)
                    std::memset(row, 0, rb);  // a skipped row is zeros, never stale memory
                batch->ok[r] = rc == FQ_OK;
                if (batch->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1)
                    finish(batch, api, index);
            });
        }
        pool_->submit(std::move(tasks));
    }

  private:
    /* "scheme://..." with an RFC 3986 scheme (a letter, then letters, digits, + - .). */
    static bool is_url(const tstring &p)
    {
        const char *d = p.data();
        const size_t n = p.size();
        if (n < 4 || !std::isalpha((unsigned char)d[0]))
            return false;
        for (size_t j = 1; j + 2 < n; j++) {
            const unsigned char ch = (unsigned char)d[j];
            if (ch == ':')
                return d[j + 1] == '/' && d[j + 2] == '/';
            if (!std::isalnum(ch) && ch != '+' && ch != '-' && ch != '.')
                return false;
        }
        return false;
    }

    /* File mode, one row: read the file into the thread's buffer, decode + augment it.  An
     * error names the file (as the FILES source does). */
    static int read_and_process(const fq_capi_v1 *api, const fq_img_spec *spec, Worker &w, const std::string &path,
                                uint64_t seed, int64_t epoch, int64_t i, uint8_t *row, fq_err *e)
    {
        int rc;
        size_t len = 0;
        if (path.find('\0') != std::string::npos) {
            rc = FQ_E_INVALID;
            std::snprintf(e->msg, sizeof e->msg, "the path holds a NUL byte");
        } else {
            rc = api->read_file(path.c_str(), &w.buf, &w.cap, &len, e);
            if (rc == FQ_OK)
                rc = api->process_encoded(spec, w.scratch, w.buf, len, seed, (uint64_t)epoch, (uint64_t)i, row,
                                          nullptr, e);
        }
        if (rc != FQ_OK) {
            std::string shown;  // the path as given, a NUL byte written \x00
            for (char ch : path)
                shown += ch ? std::string(1, ch) : std::string("\\x00");
            const std::string m = "file '" + shown + "': " + e->msg;  // truncated to fit, NUL-terminated
            const size_t k = std::min(m.size(), sizeof e->msg - 1);
            std::memcpy(e->msg, m.data(), k);
            e->msg[k] = 0;
        }
        return rc;
    }

    /* Runs on the thread that completed the last row: every row's writes happen-before
     * (acq_rel on remaining). */
    static void finish(const std::shared_ptr<Batch> &b, const fq_capi_v1 *api, const Tensor &index)
    {
        int64_t failed = 0, first = -1;
        for (size_t r = 0; r < b->errs.size(); r++)
            if (b->errs[r].code != FQ_OK) {
                failed++;
                if (first < 0)
                    first = (int64_t)r;
            }
        if (failed) {
            const fq_err &e = b->errs[first];
            const int64_t i = index.flat<int64_t>()(first);
            if (b->skip) {
                int64_t before = b->skipped_total->fetch_add(failed);
                if (before < 10)  // the first few reasons are logged; ok counts them all
                    LOG(WARNING) << b->who << ": skipped " << failed << " sample(s) of a batch; first: "
                                 << "sample index " << i << " (batch row " << first << "): " << e.msg << " ("
                                 << api->code_name(e.code) << ")";
            } else {
                std::string msg = absl::StrCat(b->who, ": sample index ", i, " (batch row ", first,
                                                  "): ", e.msg, " (", api->code_name(e.code), ")");
                if (failed > 1)
                    msg = absl::StrCat(msg, "; ", failed - 1, " more sample(s) of this batch failed too");
                b->ctx->SetStatus(e.code == FQ_E_NOMEM ? Exhausted(msg) : Invalid(msg));
            }
        }
        AsyncOpKernel::DoneCallback done = std::move(b->done);
        done();
    }

    const fq_capi_v1 *api_ = nullptr;
    fq_img_spec *spec_ = nullptr;
    uint64_t seed_ = 0;
    bool skip_ = false, nhwc_ = true, files_ = false;
    const char *who_ = "fastq.decode_augment";
    int threads_ = 1;
    int64_t h_ = 0, w_ = 0, c_ = 0;
    size_t row_bytes_ = 0;
    std::mutex pool_mu_;
    std::unique_ptr<Pool> pool_;
    std::atomic<int64_t> skipped_{0};
};

REGISTER_KERNEL_BUILDER(Name("FastqDecodeAugment").Device(DEVICE_CPU), FastqDecodeAugmentOp);
