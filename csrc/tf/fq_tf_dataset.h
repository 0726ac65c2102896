/* fq_tf_dataset.h - the parts of the kernel library shared by its translation units (C++,
 * compiled against TensorFlow's headers only by fastq/tf/ops.py):
 *
 *   fq_tf_kernel.cc   FastqDecodeAugment, the image table binding (fastq_tf_bind)
 *   fq_tf_feed.cc     the ring table binding, the Python callbacks, EpochReader
 *   fq_tf_dataset.cc  FastqDataset: op, dataset, iterator (state, checkpoints)
 *
 * Everything here has hidden visibility (the library is built with -fvisibility=hidden);
 * only the extern "C" fastq_tf_* entry points are exported, for fastq/tf/ops.py.
 */
#ifndef FQ_TF_DATASET_H
#define FQ_TF_DATASET_H

#include <cstdint>
#include <functional>
#include <vector>

#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/types.h"

#include "image/fq_capi.h"
#include "ring/fq_ring_capi.h"
#include "tf/fq_tf_feed.h"

/* The bound tables (nullptr until fastq_tf_bind / fastq_tf_bind_ring succeeded). */
const fq_capi_v1 *fastq_tf_image_api();
const fq_ring_capi_v1 *fastq_tf_ring_api();

/* One pipeline epoch read by one tf.data iterator: begin() through Python, then batches from
 * the ring in C++.  Not thread-safe: its iterator serializes the calls.  Destroying a live
 * reader abandons its epoch (end callback, or a native cancel of its run without Python). */
class EpochReader {
  public:
    /* cardinality: batches per epoch as the dataset declares it (< 0: unknown); an epoch
     * that ends with another number (minus its resumed position) is an error. */
    EpochReader(int64_t feed_id, int64_t cardinality, const tensorflow::DataTypeVector &types)
        : feed_id_(feed_id), cardinality_(cardinality), types_(types) {}
    ~EpochReader() { End(FQ_TF_END_ABANDONED); }
    EpochReader(const EpochReader &) = delete;
    EpochReader &operator=(const EpochReader &) = delete;

    bool live() const { return live_; }
    /* The last epoch ended with all its batches taken (not by an error, a close or an abandon). */
    bool finished() const { return finished_; }
    int64_t epoch() const { return ep_.epoch; }
    int64_t position() const { return ep_.position; }

    /* Start the pipeline's next epoch (epoch < 0) or resume (epoch, position). */
    absl::Status Begin(int64_t epoch, int64_t position);
    /* The next batch as one tensor per output, or *end at the end of the epoch (also when
     * the pipeline was closed).  After an error the epoch is over (live() is false).
     * cancelled() is polled while waiting. */
    absl::Status Next(const std::function<bool()> &cancelled, std::vector<tensorflow::Tensor> *out, bool *end);
    /* End a live epoch (end callback; without Python: cancel its run). */
    void End(int reason);
    /* Where Begin(-1, 0) would start now: the pipeline's next epoch and its resume position. */
    absl::Status Peek(int64_t *epoch, int64_t *position) const;

  private:
    absl::Status Check();
    absl::Status Take(const std::function<bool()> &cancelled, std::vector<tensorflow::Tensor> *out, bool *end);
    absl::Status Fail(int kind, int code, int64_t index, const char *detail);
    int Post(int slot, int n, int64_t *hb, int64_t *wb, fq_err *err, int *kind);
    absl::Status Deliver(int slot, int n, std::vector<tensorflow::Tensor> *out);

    const int64_t feed_id_, cardinality_;
    const tensorflow::DataTypeVector types_;
    bool live_ = false;
    bool finished_ = false;
    fq_tf_epoch ep_{};
    int64_t token_ = -1;
    int64_t start_position_ = 0;
    std::vector<uint8_t> mix_tmp_;
    std::vector<fq_mix_draw> mix_draws_;
    fq_mix_params mix_{};
};

#endif
