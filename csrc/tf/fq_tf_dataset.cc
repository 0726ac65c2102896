/* fq_tf_dataset.cc - the tf.data source op FastqDataset: a fastq Pipeline's batches as a
 * DatasetV2 whose iterator takes each batch from the pipeline's ring in C++ and returns
 * tensors that alias the slot, with no Python and no GIL per batch (fastq.tf.dataset).
 * The per-epoch reading is EpochReader (fq_tf_feed.cc); this file is TensorFlow's side:
 * the op, the dataset and the iterator's state and checkpoints.
 *
 * The op is a graph node with attributes only (feed_id: which Pipeline of this process,
 * output types/shapes, cardinality), so tf.data can serialize and rewrite the graph; the
 * dataset only makes sense in the process that holds the pipeline.
 *
 * Iterator = one tf.data iteration = one pipeline epoch:
 *   - idle until its first GetNext, which begins the epoch (or resumes a restored position);
 *   - live: batches; at the end of the run, after an error, or once the pipeline is closed it
 *     is done and answers end of sequence (an error is returned once, as from_generator does);
 *   - Save writes (state, epoch, position): the pipeline's position, as Pipeline.state_dict(),
 *     at every point (before the first element: the epoch it would begin, asked from Python;
 *     after the last: the epoch and its length); Restore makes the next GetNext resume there
 *     (Pipeline.load_state_dict, then the epoch), in this iterator or a fresh one;
 *   - destroyed while live: the epoch is abandoned (its producers stop).
 * GetNext, Save and Restore of one iterator are serialized by its mutex (TF may call GetNext
 * from several threads).
 */
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/model.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

#include "tf/fq_tf_dataset.h"

using namespace tensorflow;        // NOLINT: the op-registration macros expect it
using namespace tensorflow::data;  // NOLINT

REGISTER_OP("FastqDataset")
    .Output("handle: variant")
    .Attr("feed_id: int")
    .Attr("cardinality: int = -2")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetIsStateful()  // its iterators read a live pipeline: never constant-folded nor merged
    .SetShapeFn([](shape_inference::InferenceContext *c) {
        c->set_output(0, c->Scalar());
        return absl::OkStatus();
    })
    .Doc(R"doc(
The batches of a fastq Pipeline of this process (see fastq.tf.dataset): each iteration is one
pipeline epoch; the tensors alias the pipeline's ring slots.
)doc");

namespace {

class FastqDataset : public DatasetBase {
  public:
    FastqDataset(OpKernelContext *ctx, int64_t feed_id, int64_t cardinality, const DataTypeVector &types,
                 const std::vector<PartialTensorShape> &shapes)
        : DatasetBase(DatasetContext(ctx)), feed_id_(feed_id), cardinality_(cardinality), types_(types),
          shapes_(shapes) {}

    std::unique_ptr<IteratorBase> MakeIteratorInternal(const std::string &prefix) const override;
    const DataTypeVector &output_dtypes() const override { return types_; }
    const std::vector<PartialTensorShape> &output_shapes() const override { return shapes_; }
    std::string DebugString() const override { return absl::StrCat("FastqDatasetOp(feed ", feed_id_, ")::Dataset"); }
    int64_t CardinalityInternal(CardinalityOptions) const override { return cardinality_; }
    absl::Status InputDatasets(std::vector<const DatasetBase *> *) const override { return absl::OkStatus(); }
    // The pipeline lives in this process; the iterator's own state (epoch, position) is all
    // a checkpoint needs to resume it there.
    absl::Status CheckExternalState() const override { return absl::OkStatus(); }

    const int64_t feed_id_, cardinality_;

  protected:
    absl::Status AsGraphDefInternal(SerializationContext *, DatasetGraphDefBuilder *b, Node **output) const override
    {
        AttrValue feed, card;
        b->BuildAttrValue(feed_id_, &feed);
        b->BuildAttrValue(cardinality_, &card);
        return b->AddDataset(this, {}, {{"feed_id", feed}, {"cardinality", card}}, output);
    }

  private:
    const DataTypeVector types_;
    const std::vector<PartialTensorShape> shapes_;
};

class FastqIterator : public DatasetIterator<FastqDataset> {
  public:
    explicit FastqIterator(const Params &params)
        : DatasetIterator<FastqDataset>(params), reader_(params.dataset->feed_id_, params.dataset->cardinality_, params.dataset->output_dtypes()) {}

    bool SymbolicCheckpointCompatible() const override { return true; }

    absl::Status GetNextInternal(IteratorContext *ctx, std::vector<Tensor> *out, bool *end) override
    {
        std::lock_guard<std::mutex> l(mu_);
        *end = false;
        if (state_ == kDone) {
            *end = true;
            return absl::OkStatus();
        }
        if (state_ == kIdle) {
            absl::Status s = reader_.Begin(pending_ ? pending_epoch_ : -1, pending_ ? pending_position_ : 0);
            pending_ = false;
            if (!s.ok()) {
                state_ = kDone;
                return s;
            }
            state_ = kLive;
        }
        CancellationManager *cm = ctx->cancellation_manager();
        absl::Status s = reader_.Next([cm] { return cm != nullptr && cm->IsCancelled(); }, out, end);
        if (!reader_.live())  // the end of the epoch, or an error (returned once)
            state_ = kDone;
        return s;
    }

  protected:
    std::shared_ptr<model::Node> CreateNode(IteratorContext *, model::Node::Args args) const override
    {
        return model::MakeSourceNode(std::move(args));
    }

    absl::Status SaveInternal(SerializationContext *, IteratorStateWriter *w) override
    {
        std::lock_guard<std::mutex> l(mu_);
        // state 1: resume (epoch, position) at the next GetNext; 2: the iteration is over.  Every
        // point a user can see is written as an exact (epoch, position): an iterator that has not
        // begun yet as the epoch it would begin (asked from Python: the pipeline's next epoch),
        // never as "the next epoch", which is another one once batches were taken after the save;
        // one whose epoch ran to its end as (epoch, batches of the epoch), so that a restore also
        // moves the pipeline past that epoch.  Only an iteration ended by an error or a close is
        // written as over.
        int64_t state = 2, epoch = -1, position = 0;
        if (state_ == kLive && reader_.live()) {
            state = 1, epoch = reader_.epoch(), position = reader_.position();
        } else if (pending_) {
            state = 1, epoch = pending_epoch_, position = pending_position_;
        } else if (state_ == kIdle) {
            TF_RETURN_IF_ERROR(reader_.Peek(&epoch, &position));
            state = 1;
        } else if (reader_.finished()) {
            state = 1, epoch = reader_.epoch(), position = reader_.position();
        }
        TF_RETURN_IF_ERROR(w->WriteScalar(prefix(), "state", state));
        if (state == 1) {
            TF_RETURN_IF_ERROR(w->WriteScalar(prefix(), "epoch", epoch));
            TF_RETURN_IF_ERROR(w->WriteScalar(prefix(), "position", position));
        }
        return absl::OkStatus();
    }

    absl::Status RestoreInternal(IteratorContext *, IteratorStateReader *r) override
    {
        std::lock_guard<std::mutex> l(mu_);
        int64_t state = 0, epoch = -1, position = 0;
        TF_RETURN_IF_ERROR(r->ReadScalar(prefix(), "state", &state));
        if (state == 1) {
            TF_RETURN_IF_ERROR(r->ReadScalar(prefix(), "epoch", &epoch));
            TF_RETURN_IF_ERROR(r->ReadScalar(prefix(), "position", &position));
            if (epoch < 0 || position < 0)
                return absl::InvalidArgumentError(absl::StrCat("FastqDataset: bad checkpoint: epoch ", epoch,
                                                               ", position ", position));
        } else if (state != 0 && state != 2) {
            return absl::InvalidArgumentError(absl::StrCat("FastqDataset: bad checkpoint: state ", state));
        }
        reader_.End(FQ_TF_END_ABANDONED);
        state_ = state == 2 ? kDone : kIdle;
        pending_ = state == 1;  // the next GetNext resumes (epoch, position)
        pending_epoch_ = epoch;
        pending_position_ = position;
        return absl::OkStatus();
    }

  private:
    enum State { kIdle, kLive, kDone };

    std::mutex mu_;
    State state_ = kIdle;
    bool pending_ = false;
    int64_t pending_epoch_ = -1;
    int64_t pending_position_ = 0;
    EpochReader reader_;  // its destructor abandons a live epoch
    // (all guarded by mu_)
};

std::unique_ptr<IteratorBase> FastqDataset::MakeIteratorInternal(const std::string &prefix) const
{
    return std::make_unique<FastqIterator>(FastqIterator::Params{this, absl::StrCat(prefix, "::FastqDataset")});
}

class FastqDatasetOp : public DatasetOpKernel {
  public:
    explicit FastqDatasetOp(OpKernelConstruction *c) : DatasetOpKernel(c)
    {
        OP_REQUIRES_OK(c, c->GetAttr("feed_id", &feed_id_));
        OP_REQUIRES_OK(c, c->GetAttr("cardinality", &cardinality_));
        OP_REQUIRES_OK(c, c->GetAttr("output_types", &types_));
        OP_REQUIRES_OK(c, c->GetAttr("output_shapes", &shapes_));
        OP_REQUIRES(c, types_.size() == shapes_.size() && types_.size() <= FQ_TF_MAX_OUTPUTS,
                    absl::InvalidArgumentError(absl::StrCat("FastqDataset: output_types and output_shapes need "
                                                            "one entry per output (at most ", FQ_TF_MAX_OUTPUTS,
                                                            ")")));
    }

    void MakeDataset(OpKernelContext *ctx, DatasetBase **output) override
    {
        *output = new FastqDataset(ctx, feed_id_, cardinality_, types_, shapes_);
    }

  private:
    int64_t feed_id_ = 0, cardinality_ = kUnknownCardinality;
    DataTypeVector types_;
    std::vector<PartialTensorShape> shapes_;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("FastqDataset").Device(DEVICE_CPU), FastqDatasetOp);
