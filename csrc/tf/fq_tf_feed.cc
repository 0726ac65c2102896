/* fq_tf_feed.cc - EpochReader (fq_tf_dataset.h): one pipeline epoch read from the ring in
 * C++ for FastqDataset, plus the library's entry points for that op (fastq/tf/__init__.py calls them
 * through ctypes): fastq_tf_bind_ring, fastq_tf_feed_set_callbacks, fastq_tf_feed_layout.  See
 * fq_tf_feed.h for the protocol with Python.
 *
 * Per batch, with no Python: fq_ring_next_run (this epoch's run only, 20 ms slices so that a
 * cancelled iterator returns promptly; StalledError after stall_timeout with every slot
 * leased, as the Python consumer), the slot's error record, MixUp/CutMix (fq_mix_*) and
 * pad="batch" (fq_batch_pad_compact) in place, exactly as the Pipeline's Python consumer does
 * them, then one tensor per output over the slot.
 *
 * Buffer lifetime: each batch is one SlotLease (a ring reference + the leased slot), shared by
 * the SlotBuffers of its tensors; the last tensor to die - in any thread, at any time, after
 * the iterator, the dataset or the Python pipeline are gone - releases the slot and drops the
 * reference, and the ring (arena included) is destroyed with its last reference (fq_ring.h,
 * "Lifetime").  TF may free tensors without the GIL: the slot returns at once.
 *
 * Callbacks: read under a shared lock for the duration of each call; the setter takes it
 * exclusively, so once fastq_tf_feed_set_callbacks(NULL, ...) returns (Python's atexit: the
 * ctypes call releases the GIL while it waits) no callback runs any more.
 */
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <shared_mutex>
#include <string>

#include "tensorflow/core/framework/allocation_description.pb.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/platform/logging.h"

#include "tf/fq_tf_dataset.h"

using tensorflow::AllocationDescription;
using tensorflow::AllocatorMemoryType;
using tensorflow::DataTypeSize;
using tensorflow::Tensor;
using tensorflow::TensorBuffer;
using tensorflow::TensorShape;

namespace {

constexpr int64_t kSliceNs = 20 * 1000 * 1000;

std::atomic<const fq_ring_capi_v1 *> g_ring{nullptr};

std::shared_mutex g_cb_mu;
fq_tf_begin_fn g_begin = nullptr;
fq_tf_end_fn g_end = nullptr;
fq_tf_fail_fn g_fail = nullptr;
fq_tf_peek_fn g_peek = nullptr;

/* One leased batch: gives the slot back, and drops its ring reference, when destroyed. */
class SlotLease {
  public:
    SlotLease(const fq_ring_capi_v1 *api, fq_ring *ring, int slot) : api_(api), ring_(ring), slot_(slot)
    {
        api_->retain(ring_);
    }
    ~SlotLease()
    {
        fq_err e;
        std::memset(&e, 0, sizeof e);
        if (api_->release(ring_, slot_, &e) != FQ_OK)
            LOG(ERROR) << "fastq: batch slot " << slot_ << " could not be returned to the ring: " << e.msg;
        api_->unref(ring_);
    }
    SlotLease(const SlotLease &) = delete;
    SlotLease &operator=(const SlotLease &) = delete;

  private:
    const fq_ring_capi_v1 *api_;
    fq_ring *ring_;
    int slot_;
};

/* A tensor's view of one output block of a leased slot. */
class SlotBuffer : public TensorBuffer {
  public:
    SlotBuffer(void *data, size_t bytes, bool pinned, std::shared_ptr<SlotLease> lease)
        : TensorBuffer(data), bytes_(bytes), pinned_(pinned), lease_(std::move(lease)) {}
    size_t size() const override { return bytes_; }
    TensorBuffer *root_buffer() override { return this; }
    void FillAllocationDescription(AllocationDescription *proto) const override
    {
        proto->set_requested_bytes((int64_t)bytes_);
        proto->set_allocator_name("fastq_ring_slot");
    }
    // not TensorFlow's memory: never forwarded in place to another op's output
    bool OwnsMemory() const override { return false; }
    AllocatorMemoryType GetMemoryType() const override
    {
        return pinned_ ? AllocatorMemoryType::kHostPinned : AllocatorMemoryType::kHostPageable;
    }

  private:
    ~SlotBuffer() override {}
    const size_t bytes_;
    const bool pinned_;
    std::shared_ptr<SlotLease> lease_;
};

int64_t NowNs()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
}

absl::Status StatusFrom(int code, const char *msg)
{
    if (code <= 0 || code > 16)
        code = (int)absl::StatusCode::kUnknown;
    return absl::Status(static_cast<absl::StatusCode>(code), msg);
}

const char *const kNoPython =
    "fastq.tf.dataset: fastq's Python side is not available (the interpreter is exiting, or the kernel "
    "library was loaded without fastq.tf.ops.load())";

}  // namespace

const fq_ring_capi_v1 *fastq_tf_ring_api() { return g_ring.load(std::memory_order_acquire); }

/* ---- EpochReader ------------------------------------------------------------------ */

absl::Status EpochReader::Begin(int64_t epoch, int64_t position)
{
    End(FQ_TF_END_ABANDONED);
    finished_ = false;
    if (!fastq_tf_ring_api() || !fastq_tf_image_api())
        return absl::FailedPreconditionError(kNoPython);
    std::memset(&ep_, 0, sizeof ep_);
    ep_.struct_size = sizeof ep_;
    char msg[4096] = "";
    int64_t token = -1;
    int code;
    {
        std::shared_lock<std::shared_mutex> g(g_cb_mu);
        if (!g_begin)
            return absl::FailedPreconditionError(kNoPython);
        code = g_begin(feed_id_, epoch, position, &ep_, &token, msg, sizeof msg);
    }
    if (code != 0)
        return StatusFrom(code, msg);  // begin() keeps no ring reference when it fails
    if (!ep_.ring)
        return absl::OkStatus();  // an empty epoch: not live, Next() ends the iteration
    token_ = token;
    live_ = true;
    start_position_ = ep_.position;
    absl::Status s = Check();
    if (!s.ok())
        End(FQ_TF_END_ABANDONED);
    return s;
}

absl::Status EpochReader::Peek(int64_t *epoch, int64_t *position) const
{
    char msg[4096] = "";
    int code;
    {
        std::shared_lock<std::shared_mutex> g(g_cb_mu);
        if (!g_peek)
            return absl::FailedPreconditionError(kNoPython);
        code = g_peek(feed_id_, epoch, position, msg, sizeof msg);
    }
    if (code != 0)
        return StatusFrom(code, msg);
    if (*epoch < 0 || *position < 0)
        return absl::InternalError(absl::StrCat("fastq.tf.dataset: bad resume point from Python: epoch ", *epoch,
                                                ", position ", *position));
    return absl::OkStatus();
}

/* The descriptor Python filled must fit this dataset and this ring. */
absl::Status EpochReader::Check()
{
    const fq_ring_capi_v1 *api = fastq_tf_ring_api();
    fq_ring *ring = static_cast<fq_ring *>(ep_.ring);
    auto bad = [](const std::string &why) {
        return absl::InternalError(absl::StrCat("fastq.tf.dataset: bad epoch descriptor from Python: ", why));
    };
    if (ep_.struct_size != sizeof ep_ || !ring)
        return bad("size or ring");
    const int nb = api->n_blocks(ring);
    if (ep_.n_outputs != (int)types_.size())
        return bad(absl::StrCat(ep_.n_outputs, " outputs for a dataset of ", types_.size()));
    for (int k = 0; k < ep_.n_outputs; k++) {
        const fq_tf_output &o = ep_.out[k];
        if (o.block < 0 || o.block >= nb || o.dtype != (int)types_[k] || o.ndim < 0 || o.ndim > FQ_TF_MAX_DIMS)
            return bad(absl::StrCat("output ", k));
        int64_t elems = 1;
        for (int d = 0; d < o.ndim; d++)
            elems *= o.dims[d] >= 0 ? o.dims[d] : -1;
        if (elems < 0 || (size_t)elems * (size_t)DataTypeSize(types_[k]) != api->row_bytes(ring, o.block))
            return bad(absl::StrCat("output ", k, ": shape and dtype do not match the ring's row size"));
        if (o.pad_hdim >= 0 && (!ep_.pad || o.pad_hdim + 1 >= o.ndim))
            return bad(absl::StrCat("output ", k, ": pad dimension"));
    }
    if (ep_.pad && (ep_.pad_sizes_block < 0 || ep_.pad_sizes_block >= nb || ep_.pad_multiple < 1 ||
                    api->row_bytes(ring, ep_.pad_sizes_block) != 2 * sizeof(int32_t)))
        return bad("pad sizes");
    if (ep_.mix) {
        const fq_capi_v1 *img = fastq_tf_image_api();
        for (int b : {ep_.mix_image_block, ep_.mix_label_block, ep_.mix_soft_block})
            if (b < 0 || b >= nb)
                return bad("mix blocks");
        if (api->row_bytes(ring, ep_.mix_soft_block) != (size_t)ep_.mix_num_classes * sizeof(float))
            return bad("mix soft labels");
        std::memset(&mix_, 0, sizeof mix_);
        mix_.mixup_alpha = ep_.mix_mixup_alpha;
        mix_.cutmix_alpha = ep_.mix_cutmix_alpha;
        mix_.switch_prob = ep_.mix_switch_prob;
        mix_.prob = ep_.mix_prob;
        mix_.label_smoothing = ep_.mix_label_smoothing;
        mix_.num_classes = ep_.mix_num_classes;
        mix_.mode = ep_.mix_mode;
        mix_.correct_lam = ep_.mix_correct_lam;
        mix_.minmax = ep_.mix_minmax;
        mix_.cutmix_min = ep_.mix_cutmix_min;
        mix_.cutmix_max = ep_.mix_cutmix_max;
        fq_err err;
        std::memset(&err, 0, sizeof err);
        if (img->mix_check(&mix_, &err) != FQ_OK)
            return bad(absl::StrCat("mix parameters: ", err.msg));
        mix_tmp_.resize(api->row_bytes(ring, ep_.mix_image_block));
        mix_draws_.resize((size_t)api->batch_size(ring));
    }
    return absl::OkStatus();
}

void EpochReader::End(int reason)
{
    if (!live_)
        return;
    live_ = false;
    fq_ring *ring = static_cast<fq_ring *>(ep_.ring);
    {
        std::shared_lock<std::shared_mutex> g(g_cb_mu);
        if (g_end)
            g_end(token_, reason, ep_.position);
        else if (reason != FQ_TF_END_DONE)  // no Python any more: stop this epoch's producers natively
            fastq_tf_ring_api()->cancel_run(ring, ep_.run_id);
    }
    fastq_tf_ring_api()->unref(ring);
    ep_.ring = nullptr;
}

absl::Status EpochReader::Fail(int kind, int code, int64_t index, const char *detail)
{
    fq_ring *ring = static_cast<fq_ring *>(ep_.ring);
    char msg[4096] = "";
    int tf_code = (int)absl::StatusCode::kUnknown;  // 0 from Python: not an error, the epoch just ends
    live_ = false;
    {
        std::shared_lock<std::shared_mutex> g(g_cb_mu);
        if (g_fail) {  // Python builds its own exception's text and ends the epoch
            tf_code = g_fail(token_, kind, code, index, detail, msg, sizeof msg);
        } else {
            std::snprintf(msg, sizeof msg, "fastq.tf.dataset: %s (%s; sample %lld)", detail,
                          fastq_tf_ring_api()->code_name(code), (long long)index);
            fastq_tf_ring_api()->cancel_run(ring, ep_.run_id);
        }
    }
    fastq_tf_ring_api()->unref(ring);
    ep_.ring = nullptr;
    return tf_code == 0 ? absl::OkStatus() : StatusFrom(tf_code, msg);
}

absl::Status EpochReader::Next(const std::function<bool()> &cancelled, std::vector<Tensor> *out, bool *end)
{
    *end = false;
    absl::Status s = live_ ? Take(cancelled, out, end) : absl::OkStatus();
    if (s.ok() && !live_ && out->empty())  // ended, or the fail callback said "not an error"
        *end = true;
    return s;
}

absl::Status EpochReader::Take(const std::function<bool()> &cancelled, std::vector<Tensor> *out, bool *end)
{
    const fq_ring_capi_v1 *api = fastq_tf_ring_api();
    fq_ring *ring = static_cast<fq_ring *>(ep_.ring);
    int slot = -1, n = 0;
    int64_t stall_t0 = 0;
    for (;;) {
        fq_err err;
        std::memset(&err, 0, sizeof err);
        const int rc = api->next_run(ring, ep_.run_id, kSliceNs, &slot, &n, &err);
        if (rc == FQ_OK)
            break;
        if (rc == FQ_E_TIMEOUT || rc == FQ_E_STALLED) {
            if (cancelled())
                return absl::CancelledError("fastq: the tf.data iterator was cancelled while waiting for a batch");
            if (rc == FQ_E_STALLED) {
                const int64_t now = NowNs();
                if (!stall_t0)
                    stall_t0 = now;
                else if (ep_.stall_timeout_ns >= 0 && now - stall_t0 >= ep_.stall_timeout_ns)
                    return Fail(FQ_TF_FAIL_RING, FQ_E_STALLED, -1, err.msg);
            } else {
                stall_t0 = 0;
            }
            continue;
        }
        if (rc == FQ_E_EOF) {
            const int64_t got = ep_.position - start_position_;
            if (cardinality_ >= 0 && got != cardinality_ - start_position_) {
                char expected[32];
                std::snprintf(expected, sizeof expected, "%lld", (long long)(cardinality_ - start_position_));
                return Fail(FQ_TF_FAIL_COUNT, FQ_E_INVALID, got, expected);
            }
            End(FQ_TF_END_DONE);
            finished_ = true;
            *end = true;
            return absl::OkStatus();
        }
        if (rc == FQ_E_CLOSED) {  // Pipeline.close() while TF iterates: the iteration ends here
            End(FQ_TF_END_CLOSED);
            *end = true;
            return absl::OkStatus();
        }
        return Fail(FQ_TF_FAIL_RING, rc, -1, err.msg);  // FQ_E_CANCELLED: a newer run superseded ours
    }
    return Deliver(slot, n, out);
}

/* What the Pipeline's consumer does to a leased batch (in place): MixUp/CutMix, then the
 * pad="batch" repacking; *hb, *wb: the batch's padded size (pad only).  FQ_OK, or a code with
 * err (err->index: the refused row, -1: none) and *kind (the fail callback's). */
int EpochReader::Post(int slot, int n, int64_t *hb, int64_t *wb, fq_err *err, int *kind)
{
    const fq_ring_capi_v1 *api = fastq_tf_ring_api();
    const fq_capi_v1 *img = fastq_tf_image_api();
    fq_ring *ring = static_cast<fq_ring *>(ep_.ring);
    if (ep_.mix) {
        *kind = FQ_TF_FAIL_MIX;
        err->index = -1;
        int rc = img->mix_draw_batch(&mix_, ep_.mix_seed, (uint64_t)ep_.epoch, (uint64_t)ep_.position, n, ep_.mix_h,
                                     ep_.mix_w, mix_draws_.data(), err);
        if (rc != FQ_OK)
            return rc;
        err->index = -1;
        rc = img->mix_apply(&mix_, mix_draws_.data(), api->block_ptr(ring, slot, ep_.mix_image_block), ep_.mix_dtype,
                            ep_.mix_layout, n, ep_.mix_h, ep_.mix_w, ep_.mix_c,
                            api->block_ptr(ring, slot, ep_.mix_label_block), ep_.mix_ltype,
                            reinterpret_cast<float *>(api->block_ptr(ring, slot, ep_.mix_soft_block)),
                            mix_tmp_.data(), err);
        if (rc != FQ_OK)
            return rc;
    }
    if (ep_.pad) {
        *kind = FQ_TF_FAIL_RING;
        const int32_t *sizes = reinterpret_cast<const int32_t *>(api->block_ptr(ring, slot, ep_.pad_sizes_block));
        int64_t h = 1, w = 1;
        for (int r = 0; r < n; r++) {
            h = std::max<int64_t>(h, sizes[2 * r]);
            w = std::max<int64_t>(w, sizes[2 * r + 1]);
        }
        const int64_t m = ep_.pad_multiple;
        *hb = (h + m - 1) / m * m;  // fq_batch_pad_compact refuses a window over the capacity
        *wb = (w + m - 1) / m * m;
        for (int k = 0; k < ep_.n_outputs; k++) {
            const fq_tf_output &o = ep_.out[k];
            if (o.pad_hdim < 0)
                continue;
            err->index = -1;
            int rc = img->batch_pad_compact(api->block_ptr(ring, slot, o.block), (int64_t)n * o.pad_planes,
                                            ep_.pad_cap_h, ep_.pad_cap_w, (int)*hb, (int)*wb, (size_t)o.pad_px, err);
            if (rc != FQ_OK)
                return rc;
        }
    }
    return FQ_OK;
}

absl::Status EpochReader::Deliver(int slot, int n, std::vector<Tensor> *out)
{
    const fq_ring_capi_v1 *api = fastq_tf_ring_api();
    fq_ring *ring = static_cast<fq_ring *>(ep_.ring);
    auto lease = std::make_shared<SlotLease>(api, ring, slot);  // the slot is ours until the last tensor dies
    int erow = -1;
    fq_err failure, err;
    std::memset(&failure, 0, sizeof failure);
    std::memset(&err, 0, sizeof err);
    if (api->slot_error(ring, slot, &erow, &failure, &err) != FQ_OK) {
        lease.reset();
        return Fail(FQ_TF_FAIL_RING, err.code, -1, err.msg);
    }
    if (erow >= 0) {  // a failed sample: the slot goes back first, as in the Python consumer
        lease.reset();
        return Fail(FQ_TF_FAIL_SAMPLE, failure.code, failure.index, failure.msg);
    }
    int64_t hb = -1, wb = -1;
    int kind = FQ_TF_FAIL_RING;
    const int rc = Post(slot, n, &hb, &wb, &err, &kind);
    if (rc != FQ_OK) {  // the batch is refused: its slot goes back first
        lease.reset();
        return Fail(kind, rc, err.index, err.msg);
    }
    out->reserve(ep_.n_outputs);
    for (int k = 0; k < ep_.n_outputs; k++) {
        const fq_tf_output &o = ep_.out[k];
        TensorShape shape;
        shape.AddDim(n);
        int64_t elems = n;
        for (int d = 0; d < o.ndim; d++) {
            int64_t v = o.dims[d];
            if (o.pad_hdim >= 0 && d == o.pad_hdim)
                v = hb;
            else if (o.pad_hdim >= 0 && d == o.pad_hdim + 1)
                v = wb;
            shape.AddDim(v);
            elems *= v;
        }
        auto *buf = new SlotBuffer(api->block_ptr(ring, slot, o.block), (size_t)elems * DataTypeSize(types_[k]),
                                   ep_.pinned != 0, lease);
        out->emplace_back(types_[k], shape, buf);  // the tensor takes its own reference
        buf->Unref();
    }
    ep_.position++;
    if (ep_.position_out)
        __atomic_store_n(ep_.position_out, ep_.position, __ATOMIC_RELAXED);
    return absl::OkStatus();
}

/* ---- entry points for fastq/tf/__init__.py (ctypes) ---------------------------------------- */

/* Find fastq._native._core's ring table, as fastq_tf_bind finds fastq._native._image's image table. */
extern "C" __attribute__((visibility("default"))) int fastq_tf_bind_ring(const char *core_so, char *msg,
                                                                          size_t msglen)
{
    if (!core_so || !msg || msglen == 0)
        return -1;
    void *h = dlopen(core_so, RTLD_NOLOAD | RTLD_NOW);
    if (!h) {
        const char *e = dlerror();
        std::snprintf(msg, msglen, "fastq._native._core (%s) is not loaded in this process (%s)", core_so,
                      e ? e : "dlopen RTLD_NOLOAD failed");
        return -1;
    }
    const fq_ring_capi_v1 *api = static_cast<const fq_ring_capi_v1 *>(dlsym(h, FQ_RING_CAPI_SYMBOL));
    if (dlclose(h) != 0) {
        std::snprintf(msg, msglen, "dlclose of %s failed", core_so);
        return -1;
    }
    if (!api) {
        std::snprintf(msg, msglen, "%s does not export %s: this fastq build predates the TensorFlow dataset op; "
                      "rebuild or reinstall fastq", core_so, FQ_RING_CAPI_SYMBOL);
        return -1;
    }
    if (api->abi_version != FQ_RING_CAPI_ABI_VERSION || api->struct_size < sizeof(fq_ring_capi_v1) ||
        api->sizeof_fq_err != sizeof(fq_err) || api->max_blocks != FQ_RING_MAX_BLOCKS) {
        std::snprintf(msg, msglen, "fastq ring API mismatch between %s (abi %u, table %u bytes, fq_err %u) and the "
                      "kernel (abi %u, table %zu, fq_err %zu): the kernel cache is stale; delete it "
                      "(fastq.tf.ops.cache_dir()) and load again", core_so, api->abi_version, api->struct_size,
                      api->sizeof_fq_err, FQ_RING_CAPI_ABI_VERSION, sizeof(fq_ring_capi_v1), sizeof(fq_err));
        return -1;
    }
    g_ring.store(api, std::memory_order_release);
    msg[0] = 0;
    return 0;
}

/* Install (or, with NULLs, remove) the Python callbacks; removal waits for calls in flight. */
extern "C" __attribute__((visibility("default"))) void fastq_tf_feed_set_callbacks(fq_tf_begin_fn begin,
                                                                                   fq_tf_end_fn end,
                                                                                   fq_tf_fail_fn fail,
                                                                                   fq_tf_peek_fn peek)
{
    std::unique_lock<std::shared_mutex> g(g_cb_mu);
    g_begin = begin;
    g_end = end;
    g_fail = fail;
    g_peek = peek;
}

/* sizeof / offsetof of fq_tf_feed.h as compiled here, for the ctypes mirror's check. */
extern "C" __attribute__((visibility("default"))) int fastq_tf_feed_layout(uint64_t *out, int n)
{
    const uint64_t v[] = {sizeof(fq_tf_epoch), sizeof(fq_tf_output), offsetof(fq_tf_epoch, ring),
                          offsetof(fq_tf_epoch, position_out), offsetof(fq_tf_epoch, n_outputs),
                          offsetof(fq_tf_epoch, pad), offsetof(fq_tf_epoch, mix),
                          offsetof(fq_tf_epoch, mix_mixup_alpha), offsetof(fq_tf_epoch, mix_num_classes),
                          offsetof(fq_tf_epoch, mix_mode), offsetof(fq_tf_epoch, mix_seed),
                          offsetof(fq_tf_epoch, out), offsetof(fq_tf_output, dims),
                          offsetof(fq_tf_output, pad_planes), offsetof(fq_tf_output, pad_px)};
    const int count = (int)(sizeof v / sizeof v[0]);
    for (int i = 0; i < n && i < count; i++)
        out[i] = v[i];
    return count;
}
