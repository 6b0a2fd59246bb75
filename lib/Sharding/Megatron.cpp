//===- Megatron.cpp - The megatron sharding preset ------------------------===//
//
// Finds Megatron-style tensor parallelism in an imported transformer without
// relying on names. Every matmul by a 2-D parameter (or its transpose: an
// ONNX Gemm with transB) whose left operand is not itself split is a
// candidate "column" projection: its output features would
// be split. The split output feature is followed forward through the ops of
// the block, dimension by dimension (reshapes move it to the head dimension,
// transposes permute it, elementwise ops and batched GEMMs over (batch,
// heads) keep it), until a matmul by a parameter contracts over it: that
// "row" projection closes the block, and its output is summed across ranks
// (one all_reduce). A split read inside a generic's body at the position of
// one of its parallel loops (a scatter's updates: the new keys written into
// a static cache at run-time positions) moves with that loop.
//
// Candidates whose split meets each other (Q and K in QK^T, gate and up in
// SwiGLU) form one block. A block is kept only if every path of its split
// reaches a row projection or the model's output (an LM head; the key/value
// cache a decoding step returns, gathered there) without a reduction over
// the split dimension; a block whose split does not divide a dimension on
// the way (four ranks, two key/value heads) is dropped and the analysis
// rerun without it, so that the rest can still be split. Features reshaped
// to (1, n) may be one head of n or one token's: Track::oneHead.
//
// A projection that fuses Q with fewer key/value heads (Falcon, GPT-BigCode)
// and so fails is given one GEMM a part (UnfuseProjections.cpp) and the
// analysis rerun with the key/value parts whole, as if the model had
// separate projections.
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/Plan.h"
#include "cleave/Support/Parameters.h"
#include "cleave/Support/OnnxNode.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace cleave;

namespace {

/// The ONNX node an op was imported from, for messages.
std::string nodeName(Operation *op) { return onnxNodeName(op->getLoc()); }

/// One step from `v` back toward the tensor it is stored as, following
/// dimension `dim`: through a transpose, a reshape (a merged dimension is its
/// outermost part, a split one only from its outermost part), or the ops
/// that read a quantized weight (elementwiseSource: widen, unpack codes,
/// subtract the zero point, scale). None if `v` is made otherwise.
std::optional<std::pair<Value, int64_t>> stepTowardStorage(Value v,
                                                           int64_t dim) {
  Operation *op = v.getDefiningOp();
  if (auto transpose = dyn_cast_or_null<linalg::TransposeOp>(op))
    return std::make_pair(transpose.getInput(),
                          transpose.getPermutation()[dim]);
  if (auto collapse = dyn_cast_or_null<tensor::CollapseShapeOp>(op)) {
    // The group's outermost dimension that holds more than one element
    // (unit dimensions hold none of the split).
    ReassociationIndices group = collapse.getReassociationIndices()[dim];
    auto outer = llvm::find_if(group, [&](int64_t d) {
      return collapse.getSrcType().getDimSize(d) != 1;
    });
    return std::make_pair(collapse.getSrc(),
                          outer == group.end() ? group.front() : *outer);
  }
  if (auto expand = dyn_cast_or_null<tensor::ExpandShapeOp>(op)) {
    for (auto [src, group] : llvm::enumerate(expand.getReassociationIndices()))
      if (group.front() == dim)
        return std::make_pair(expand.getSrc(), int64_t(src));
    return std::nullopt;
  }
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  Value source = generic ? elementwiseSource(generic) : nullptr;
  if (!source || dim >= cast<RankedTensorType>(source.getType()).getRank())
    return std::nullopt;
  return std::make_pair(source, dim);
}

/// The parameters of the dequantization a quantized weight reaches GEMM
/// operand `operand` through (per-channel or per-block scales and zero
/// points) that are indexed by the operand's dimension `dim`, each with its
/// dimension that is, where `shards` divides it: split along with the
/// weight, or propagation would gather the weight to match them.
SmallVector<std::pair<BlockArgument, int64_t>>
channelParameters(func::FuncOp main, Value operand, int64_t dim,
                  int64_t shards) {
  SmallVector<std::pair<BlockArgument, int64_t>> found;
  while (auto step = stepTowardStorage(operand, dim)) {
    auto generic = operand.getDefiningOp<linalg::GenericOp>();
    Value source = step->first;
    for (OpOperand *in :
         generic ? generic.getDpsInputOperands() : SmallVector<OpOperand *>{}) {
      if (in->get() == source)
        continue;
      for (auto [r, e] :
           llvm::enumerate(generic.getMatchingIndexingMap(in).getResults())) {
        auto d = dyn_cast<AffineDimExpr>(e);
        if (!d || d.getPosition() != dim)
          continue;
        // Back through reshapes, widening and unpacking to what is stored.
        Value v = in->get();
        int64_t at = r;
        while (auto back = stepTowardStorage(v, at))
          std::tie(v, at) = *back;
        BlockArgument param = parameterArgument(main, v);
        if (param &&
            cast<RankedTensorType>(param.getType()).getDimSize(at) % shards ==
                0)
          found.push_back({param, at});
      }
    }
    std::tie(operand, dim) = *step;
  }
  return found;
}

/// Whether `reduce` keeps the largest or smallest element: its partial
/// results on each rank combine with one all-reduce of the same kind.
bool isMaxOrMin(linalg::ReduceOp reduce) {
  Block &body = reduce.getCombiner().front();
  if (body.getOperations().size() != 2)
    return false;
  Operation *combiner = &body.front();
  return isa<arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp,
             arith::MinNumFOp, arith::MaxSIOp, arith::MinSIOp>(combiner);
}

/// What dimension `dim` of a matmul's right operand is in the value it
/// reads: the operand itself; for a weight stored transposed (an ONNX Gemm
/// with transB), the transpose's input and its dimension; for a weight
/// stored quantized, the integers the dequantization reads (for
/// MatMulNBits' blocks along K, K's blocks).
std::pair<Value, int64_t> weightDim(Value operand, int64_t dim) {
  while (auto step = stepTowardStorage(operand, dim))
    std::tie(operand, dim) = *step;
  return {operand, dim};
}

struct SplitBlock {
  SmallVector<Operation *> columns; // matmuls split by output feature
  SmallVector<Operation *> rows;    // matmuls split by input feature
  SmallVector<std::pair<BlockArgument, int64_t>> biases;
  /// Split values whose largest or smallest element is taken (the range of
  /// a dynamic quantization), with their split dimension: annotated, or
  /// propagation, seeing the whole-tensor result, would gather them.
  SmallVector<std::pair<Value, int64_t>> ranges;
  bool reachesOutput = false;
};

/// One run of the forward analysis with some candidates excluded.
class Analysis {
public:
  Analysis(func::FuncOp main, int64_t shards, int64_t otherShards,
           const llvm::DenseSet<Operation *> &excluded)
      : main(main), shards(shards), otherShards(otherShards),
        excluded(excluded) {}

  /// Runs the analysis; returns the candidates of blocks that failed.
  llvm::DenseSet<Operation *> run() {
    for (Operation &op : main.getBody().front())
      visit(&op);
    llvm::DenseSet<Operation *> failed;
    for (Operation *root : broken)
      for (auto it = roots.findLeader(root); it != roots.member_end(); ++it)
        failed.insert(*it);
    // A block none of whose splits is closed or leaves the model is useless.
    for (auto &entry : roots) {
      if (!entry->isLeader())
        continue;
      Operation *leader = entry->getData();
      SplitBlock &block = blocks[leader];
      if (block.rows.empty() && !block.reachesOutput)
        for (auto it = roots.member_begin(*entry); it != roots.member_end();
             ++it)
          failed.insert(*it);
    }
    return failed;
  }

  /// Collapses that merged a batch no other mesh axis splits into the
  /// split dimension (batch x heads for a batched GEMM), and that batch.
  SmallVector<std::pair<Operation *, int64_t>> batchFolds;
  /// Row projections whose weight is stored in blocks along K that the
  /// ranks do not divide (MatMulNBits with fewer blocks than ranks).
  SmallVector<Operation *> unevenBlocks;
  /// Slices of a split projection output into parts of unequal sizes (Q
  /// fused with fewer key/value heads), with the candidate they came from.
  SmallVector<std::pair<Operation *, Operation *>> unequalParts;

  /// The blocks found, by leader candidate (valid after a run with no
  /// failures).
  std::vector<SplitBlock> result() {
    std::vector<SplitBlock> out;
    for (auto &entry : roots) {
      if (!entry->isLeader())
        continue;
      SplitBlock block = blocks[entry->getData()];
      for (auto it = roots.member_begin(*entry); it != roots.member_end(); ++it)
        block.columns.push_back(*it);
      out.push_back(std::move(block));
    }
    return out;
  }

private:
  struct Track {
    int64_t dim;
    Operation *root;
    /// The split dimension has a batch folded in before it, which the other
    /// mesh axes split (batch x heads collapsed for a batch matmul).
    bool foldedBatch = false;
    /// Features reshaped to (1, n): n may be the features of one token, or
    /// one head of n (multi-query attention, whose single key/value head
    /// cannot be split). Taken for a head where it meets another split on
    /// another loop, or a contraction over it (see dropOneHeads).
    bool oneHead = false;
  };

  Operation *leader(Operation *root) { return roots.getLeaderValue(root); }
  void fail(Operation *root) { broken.insert(leader(root)); }
  void join(Operation *a, Operation *b) {
    Operation *la = leader(a), *lb = leader(b);
    if (la == lb)
      return;
    SplitBlock merged = blocks[la];
    SplitBlock &other = blocks[lb];
    merged.rows.append(other.rows);
    merged.biases.append(other.biases);
    merged.ranges.append(other.ranges);
    merged.reachesOutput |= other.reachesOutput;
    roots.unionSets(a, b);
    blocks[leader(a)] = std::move(merged);
    if (broken.contains(la) || broken.contains(lb))
      broken.insert(leader(a));
  }
  SplitBlock &blockOf(Operation *root) { return blocks[leader(root)]; }

  /// The splits `op`'s regions read that move with one of its loops, with
  /// that loop: in a generic's body, read only at the position of a
  /// parallel loop (a scatter's updates, read at the head of the element
  /// written). Any other split read in a region (a gather's split table)
  /// fails its block.
  SmallVector<std::pair<unsigned, Track>> readInBody(Operation *op) {
    auto generic = dyn_cast<linalg::GenericOp>(op);
    // In the order the body reads them, so that the analysis is repeatable.
    llvm::MapVector<Value, std::optional<unsigned>> readAlong;
    op->walk([&](Operation *nested) {
      if (nested == op)
        return;
      for (Value v : nested->getOperands()) {
        auto it = tracked.find(v);
        if (it == tracked.end())
          continue;
        std::optional<unsigned> loop =
            generic ? loopReading(generic, nested, v, it->second.dim)
                    : std::nullopt;
        auto entry = readAlong.try_emplace(v, loop).first;
        if (entry->second != loop)
          entry->second = std::nullopt;
      }
    });
    SmallVector<std::pair<unsigned, Track>> captured;
    for (auto &[v, loop] : readAlong) {
      if (loop)
        captured.push_back({*loop, tracked[v]});
      else
        fail(tracked[v].root);
    }
    return captured;
  }

  void visit(Operation *op) {
    SmallVector<std::pair<unsigned, Track>> inputs;
    for (OpOperand &operand : op->getOpOperands())
      if (auto it = tracked.find(operand.get()); it != tracked.end())
        inputs.push_back({operand.getOperandNumber(), it->second});
    SmallVector<std::pair<unsigned, Track>> capturedLoops = readInBody(op);
    auto generic = dyn_cast<linalg::GenericOp>(op);

    if (auto matmul = dyn_cast<linalg::MatmulOp>(op)) {
      BlockArgument weight =
          parameterArgument(main, weightDim(matmul.getInputs()[1], 0).first);
      if (inputs.empty()) {
        auto type = cast<RankedTensorType>(matmul.getInputs()[1].getType());
        if (weight && type.getRank() == 2 && !excluded.contains(op) &&
            type.getDimSize(1) % shards == 0) {
          roots.insert(op);
          blocks[op] = SplitBlock();
          tracked[op->getResult(0)] = {1, op};
        }
        return;
      }
      for (auto &[index, track] : inputs) {
        if (index == 0 && track.dim == 1 && weight) {
          // A weight stored in blocks along K (MatMulNBits) splits only on
          // block boundaries: the ranks must divide the blocks.
          auto [stored, storedDim] = weightDim(matmul.getInputs()[1], 0);
          int64_t storedSize =
              cast<RankedTensorType>(stored.getType()).getDimSize(storedDim);
          int64_t k = cast<RankedTensorType>(matmul.getInputs()[1].getType())
                          .getDimSize(0);
          if (storedSize != k && storedSize % shards != 0) {
            unevenBlocks.push_back(op);
            fail(track.root);
            continue;
          }
          blockOf(track.root).rows.push_back(op);
          continue;
        }
        fail(track.root);
      }
      return;
    }
    dropOneHeads(op, inputs);
    if (inputs.empty() && capturedLoops.empty())
      return;
    Operation *root =
        (inputs.empty() ? capturedLoops : inputs).front().second.root;
    for (auto &[index, track] :
         llvm::concat<std::pair<unsigned, Track>>(inputs, capturedLoops))
      join(root, track.root);
    if (generic)
      return visitGeneric(generic, inputs, capturedLoops);
    if (!capturedLoops.empty())
      return fail(root);
    // Below, the split of `in` moves to `dim` of the op's result, as
    // undecided as it was between one head and one token (Track::oneHead).
    const Track &in = inputs.front().second;
    auto follow = [&](Value result, int64_t dim, bool foldedBatch = false) {
      tracked[result] = {dim, root, foldedBatch, in.oneHead};
    };

    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      blockOf(root).reachesOutput = true;
      return;
    }
    if (auto reduce = dyn_cast<linalg::ReduceOp>(op)) {
      int64_t d = in.dim;
      if (inputs.front().first != 0)
        return fail(root);
      // The largest or smallest element of a split tensor (the range a
      // dynamic quantization reads) is each rank's, then one all-reduce:
      // the result is whole on every rank, and the split goes no further.
      if (llvm::is_contained(reduce.getDimensions(), d)) {
        if (!isMaxOrMin(reduce))
          return fail(root);
        blockOf(root).ranges.push_back({reduce.getInputs()[0], d});
        return;
      }
      int64_t below = llvm::count_if(reduce.getDimensions(),
                                     [&](int64_t r) { return r < d; });
      follow(reduce->getResult(0), d - below, in.foldedBatch);
      return;
    }
    if (auto transpose = dyn_cast<linalg::TransposeOp>(op)) {
      if (inputs.front().first != 0)
        return fail(root);
      auto perm = transpose.getPermutation();
      for (auto [i, p] : llvm::enumerate(perm))
        if (p == in.dim)
          follow(transpose->getResult(0), int64_t(i));
      return;
    }
    if (auto broadcast = dyn_cast<linalg::BroadcastOp>(op)) {
      if (inputs.front().first != 0)
        return fail(root);
      // Input dimensions keep their order among the output's; the inserted
      // `dimensions` are new.
      int64_t seen = -1;
      for (int64_t out = 0; out < broadcast.getInit().getType().getRank();
           ++out) {
        if (llvm::is_contained(broadcast.getDimensions(), out))
          continue;
        if (++seen == in.dim)
          follow(broadcast->getResult(0), out);
      }
      return;
    }
    if (auto bmm = dyn_cast<linalg::BatchMatmulOp>(op)) {
      for (auto &[index, track] : inputs)
        if (index > 1 || track.dim != 0)
          return fail(root);
      tracked[bmm->getResult(0)] = {0, root, in.foldedBatch};
      return;
    }
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
      // The split goes to the group's first dimension larger than one, or,
      // under data parallelism, to the one after a batch the other axes
      // split fully (the inverse of the collapse below).
      int64_t d = in.dim;
      auto group = expand.getReassociationIndices()[d];
      RankedTensorType type = expand.getResultType();
      std::optional<int64_t> lead, afterBatch;
      int64_t before = 1;
      for (int64_t g : group) {
        if (!lead && type.getDimSize(g) != 1)
          lead = g;
        if (!afterBatch && in.foldedBatch && before == otherShards &&
            type.getDimSize(g) != 1)
          afterBatch = g;
        before *= type.getDimSize(g);
      }
      int64_t chosen = afterBatch ? *afterBatch : lead ? *lead : group.front();
      if (type.getDimSize(chosen) % shards != 0)
        return fail(root);
      // Features (the innermost dimension) split into (1, n) may be one
      // head of n (multi-query attention) or one token's features: decided
      // later (Track::oneHead). A unit dimension before an outer one is a
      // batch of one ([heads, ...] to [1, heads, ...]), no such head.
      bool innermost = d + 1 == expand.getSrcType().getRank();
      bool oneHead = !afterBatch && innermost && group.size() > 1 &&
                     chosen == group.back() &&
                     type.getDimSize(group.front()) == 1;
      // Still undecided where the features stay whole (a unit dimension
      // added elsewhere); decided where they are cut into heads.
      oneHead |= in.oneHead && chosen == group.back();
      tracked[expand.getResult()] = {chosen, root, false, oneHead};
      return;
    }
    if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op)) {
      int64_t d = in.dim;
      for (auto [g, group] :
           llvm::enumerate(collapse.getReassociationIndices())) {
        if (!llvm::is_contained(group, d))
          continue;
        // Dimensions folded in before the split one must hold one element
        // per rank: size one, or a batch the other mesh axes split fully
        // (attention's batch x heads before a batch matmul).
        int64_t before = 1;
        for (int64_t m : group) {
          if (m == d)
            break;
          before *= collapse.getSrcType().getDimSize(m);
        }
        if (before != 1 && before != otherShards) {
          // Merged into a leading dimension, that is a batch (batch x
          // heads); merged into the last, the split was inside a head.
          if (g + 1 < collapse.getReassociationIndices().size())
            batchFolds.push_back({collapse, before});
          return fail(root);
        }
        follow(collapse.getResult(), int64_t(g), before != 1);
      }
      return;
    }
    if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
      if (inputs.front().first != 0 ||
          slice.getSourceType().getRank() != slice.getResultType().getRank())
        return fail(root);
      int64_t d = in.dim;
      int64_t full = slice.getSourceType().getDimSize(d);
      int64_t size = slice.getStaticSizes()[d];
      if (slice.getStaticStrides()[d] != 1 || size == ShapedType::kDynamic)
        return fail(root);
      // Parts of different sizes (Q fused with fewer key/value heads) are
      // kept local by storing the weight reordered, when each part splits.
      bool unequal =
          full % size != 0 || slice.getStaticOffsets()[d] % size != 0 ||
          llvm::any_of(slice.getSource().getUsers(), [&](Operation *user) {
            auto other = dyn_cast<tensor::ExtractSliceOp>(user);
            return other &&
                   other.getSourceType().getRank() ==
                       slice.getSourceType().getRank() &&
                   other.getStaticSizes()[d] != size;
          });
      if (unequal)
        unequalParts.push_back({slice, root});
      if (size != full && size % shards != 0)
        return fail(root);
      // A slice into parts of a fused projection: the weights are reordered
      // so that every rank's columns hold its share of each part.
      follow(slice.getResult(), d);
      return;
    }
    if (auto concat = dyn_cast<tensor::ConcatOp>(op)) {
      for (auto &[index, track] : inputs)
        if (track.dim == static_cast<int64_t>(concat.getDim()) ||
            track.dim != in.dim)
          return fail(root);
      follow(concat.getResult(), in.dim);
      return;
    }
    fail(root);
  }

  /// Splits of (1, n) features (Track::oneHead) that `op` shows to be one
  /// head of n: in a generic, those on a reduction loop (QK^T contracts
  /// K's head) or on another loop than a split that is not one (PV: the
  /// probabilities split by head, V by its head's features); in a batch
  /// matmul, those not on the batch. Such a projection is left whole on
  /// its own (its block fails alone), before its split joins the others'.
  void dropOneHeads(Operation *op,
                    SmallVectorImpl<std::pair<unsigned, Track>> &inputs) {
    if (llvm::none_of(inputs, [](auto &in) { return in.second.oneHead; }))
      return;
    auto conflicts = [&](unsigned index, const Track &track) {
      if (isa<linalg::BatchMatmulOp>(op))
        return track.dim != 0;
      auto generic = dyn_cast<linalg::GenericOp>(op);
      if (!generic || index >= generic.getNumDpsInputs())
        return false;
      auto loopOf = [&](unsigned i, const Track &t) -> std::optional<unsigned> {
        auto expr = dyn_cast<AffineDimExpr>(
            generic.getMatchingIndexingMap(&generic->getOpOperand(i))
                .getResult(t.dim));
        if (!expr)
          return std::nullopt;
        return expr.getPosition();
      };
      std::optional<unsigned> loop = loopOf(index, track);
      if (!loop || generic.getIteratorTypesArray()[*loop] !=
                       utils::IteratorType::parallel)
        return true;
      return llvm::any_of(inputs, [&](auto &other) {
        return !other.second.oneHead &&
               other.first < generic.getNumDpsInputs() &&
               loopOf(other.first, other.second) != loop;
      });
    };
    SmallVector<std::pair<unsigned, Track>> kept;
    for (auto &[index, track] : inputs) {
      if (track.oneHead && conflicts(index, track))
        fail(track.root);
      else
        kept.push_back({index, track});
    }
    inputs.assign(kept.begin(), kept.end());
  }

  /// The loop of `generic` at whose position `user`, in its body, reads
  /// dimension `dim` of `value`: a tensor.extract indexed there by that
  /// loop's linalg.index.
  static std::optional<unsigned> loopReading(linalg::GenericOp generic,
                                             Operation *user, Value value,
                                             int64_t dim) {
    auto extract = dyn_cast<tensor::ExtractOp>(user);
    if (!extract || extract.getTensor() != value)
      return std::nullopt;
    auto index = extract.getIndices()[dim].getDefiningOp<linalg::IndexOp>();
    if (!index || index->getParentOp() != generic)
      return std::nullopt;
    return index.getDim();
  }

  /// `inputs` are the split operands; `captured`, the splits the body reads
  /// at a loop's position (with that loop).
  void visitGeneric(linalg::GenericOp generic,
                    ArrayRef<std::pair<unsigned, Track>> inputs,
                    ArrayRef<std::pair<unsigned, Track>> captured) {
    const Track &first = (inputs.empty() ? captured : inputs).front().second;
    Operation *root = first.root;
    SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
    auto iterators = generic.getIteratorTypesArray();
    // The loop that carries the split, the same for every split input.
    std::optional<unsigned> loop;
    for (auto &[index, track] : inputs) {
      if (index >= generic.getNumDpsInputs())
        return fail(root);
      auto expr = dyn_cast<AffineDimExpr>(maps[index].getResult(track.dim));
      if (!expr || (loop && *loop != expr.getPosition()))
        return fail(root);
      loop = expr.getPosition();
    }
    for (auto &[capturedLoop, track] : captured) {
      if (loop && *loop != capturedLoop)
        return fail(root);
      loop = capturedLoop;
    }
    if (iterators[*loop] != utils::IteratorType::parallel)
      return fail(root);
    // Parameters indexed by the split loop are split with it (biases).
    for (OpOperand *operand : generic.getDpsInputOperands()) {
      if (tracked.count(operand->get()))
        continue;
      std::optional<unsigned> pos =
          maps[operand->getOperandNumber()].getResultPosition(
              getAffineDimExpr(*loop, generic.getContext()));
      if (!pos)
        continue;
      if (BlockArgument param = parameterArgument(main, operand->get())) {
        blockOf(root).biases.push_back({param, *pos});
        continue;
      }
      // A bias stored quantized: its integers, scales and zero points.
      auto [stored, storedDim] = weightDim(operand->get(), *pos);
      BlockArgument param = parameterArgument(main, stored);
      if (stored == operand->get() || !param)
        continue;
      blockOf(root).biases.push_back({param, storedDim});
      blockOf(root).biases.append(
          channelParameters(main, operand->get(), *pos, shards));
    }
    for (OpResult result : generic->getResults()) {
      AffineMap map =
          maps[generic.getNumDpsInputs() + result.getResultNumber()];
      std::optional<unsigned> pos =
          map.getResultPosition(getAffineDimExpr(*loop, generic.getContext()));
      if (!pos)
        return fail(root);
      tracked[result] = {int64_t(*pos), root, first.foldedBatch, first.oneHead};
    }
  }

  func::FuncOp main;
  int64_t shards;
  /// Ranks along the mesh's axes that may split the batch (data
  /// parallelism): not this axis, not the pipeline's.
  int64_t otherShards;
  const llvm::DenseSet<Operation *> &excluded;
  llvm::EquivalenceClasses<Operation *> roots;
  llvm::DenseMap<Operation *, SplitBlock> blocks; // by leader
  llvm::DenseSet<Operation *> broken;             // leaders
  llvm::DenseMap<Value, Track> tracked;
};

} // namespace

SmallVector<std::pair<BlockArgument, Operation *>>
cleave::vocabularyLookups(func::FuncOp main) {
  // Only the table with the most rows, as Megatron-LM does: splitting a
  // table of token types (2 rows) or positions saves little memory for the
  // same all-reduce.
  int64_t mostRows = 0;
  SmallVector<std::pair<BlockArgument, Operation *>> lookups;
  main.walk([&](tensor::ExtractOp extract) {
    BlockArgument table = parameterArgument(main, extract.getTensor());
    auto generic = extract->getParentOfType<linalg::GenericOp>();
    if (!table || !generic)
      return;
    auto type = cast<RankedTensorType>(table.getType());
    bool columnsWhole =
        llvm::all_of(extract.getIndices().drop_front(), [](Value v) {
          return v.getDefiningOp<linalg::IndexOp>() != nullptr;
        });
    bool constantRows = llvm::all_of(generic.getDpsInputs(), [](Value v) {
      return matchPattern(v, m_Constant());
    });
    if (type.getRank() != 2 || !columnsWhole || constantRows)
      return;
    mostRows = std::max(mostRows, type.getDimSize(0));
    lookups.push_back({table, generic});
  });
  llvm::erase_if(lookups, [&](auto &lookup) {
    return cast<RankedTensorType>(lookup.first.getType()).getDimSize(0) !=
           mostRows;
  });
  return lookups;
}

std::vector<ValueSharding>
cleave::megatronShardings(ModuleOp module, const MeshSpec &mesh,
                          StringRef axisName, ArrayRef<ValueSharding> given) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  std::optional<unsigned> axis = mesh.axisIndex(axisName);
  if (!main || !axis)
    return {};
  int64_t shards = mesh.axisSizes[*axis];
  // The axes that may split the batch: all but this one and the pipeline
  // stages' (each stage has the whole batch, or a microbatch of it).
  int64_t others = mesh.rankCount() / shards;
  if (std::optional<unsigned> pp = mesh.axisIndex("pp"))
    others /= mesh.axisSizes[*pp];
  llvm::DenseSet<Operation *> excluded;
  std::vector<SplitBlock> blocks;
  std::optional<std::pair<Operation *, int64_t>> batchFold;
  Operation *unequal = nullptr;
  llvm::DenseSet<Value> fixed;
  for (const ValueSharding &s : given)
    fixed.insert(s.value);
  // Projections given one GEMM a part: the widest part (Q), and the others
  // (the key/value heads), which stay whole: such a projection is rewritten
  // only where its parts did not split alike.
  SmallVector<Operation *> unfusedQ;
  llvm::DenseSet<Operation *> keptWhole;
  Operation *unevenBlock = nullptr;
  while (true) {
    Analysis analysis(main, shards, others, excluded);
    llvm::DenseSet<Operation *> failed = analysis.run();
    // A fused projection whose parts do not split alike gets one GEMM a
    // part, and the analysis starts again on the rewritten function.
    SmallVector<linalg::MatmulOp> failedRoots;
    main.walk([&](linalg::MatmulOp op) {
      if (failed.contains(op))
        failedRoots.push_back(op);
    });
    bool unfused = false;
    for (linalg::MatmulOp root : failedRoots) {
      SmallVector<Operation *> parts = unfuseProjection(main, root, fixed);
      if (parts.empty())
        continue;
      unfused = true;
      auto widest = llvm::max_element(parts, [](Operation *a, Operation *b) {
        return cast<RankedTensorType>(a->getResult(0).getType())
                   .getNumElements() <
               cast<RankedTensorType>(b->getResult(0).getType())
                   .getNumElements();
      });
      unfusedQ.push_back(*widest);
      for (Operation *part : parts)
        if (part != *widest)
          keptWhole.insert(part);
    }
    if (unfused) {
      excluded = keptWhole;
      continue;
    }
    if (!batchFold && !analysis.batchFolds.empty())
      batchFold = analysis.batchFolds.front();
    if (!unevenBlock && !analysis.unevenBlocks.empty())
      unevenBlock = analysis.unevenBlocks.front();
    for (auto [slice, root] : analysis.unequalParts)
      if (!unequal && failed.contains(root))
        unequal = slice;
    if (failed.empty()) {
      blocks = analysis.result();
      break;
    }
    excluded.insert(failed.begin(), failed.end());
  }
  // Attention's heads cannot be split where the model itself merges them
  // with a batch that stays whole (a reshape to batch * heads for a 3-D
  // MatMul): each rank's heads would not be one block of the merged
  // dimension. Say so, and how to get the split.
  if (batchFold) {
    auto [collapse, batch] = *batchFold;
    auto diag = mlir::emitWarning(collapse->getLoc())
                << "preset megatron: attention at ONNX node '"
                << nodeName(collapse)
                << "' (and any like it) is not split over '" << axisName
                << "': the model merges its heads with a batch of " << batch;
    if (others == 1)
      diag << " that no other mesh axis splits; compile for a batch of 1, or "
              "split the batch too (add dp="
           << batch << " to the mesh)";
    else
      diag << ", which the other mesh axes' " << others
           << " ranks do not split into one sequence each";
  }

  // A weight stored in blocks along K, fewer than the ranks or not a
  // multiple of them: its block stays whole rather than split inside a
  // quantization block.
  if (unevenBlock) {
    Value rhs = unevenBlock->getOperand(1);
    auto [stored, storedDim] = weightDim(rhs, 0);
    int64_t blocks =
        cast<RankedTensorType>(stored.getType()).getDimSize(storedDim);
    int64_t k = cast<RankedTensorType>(rhs.getType()).getDimSize(0);
    auto diag = mlir::emitWarning(unevenBlock->getLoc())
                << "preset megatron: the projection at ONNX node '"
                << nodeName(unevenBlock) << "' (and any like it) is not split "
                << "over '" << axisName << "': its weight";
    if (BlockArgument param = parameterArgument(main, stored))
      if (auto name = main.getArgAttrOfType<StringAttr>(param.getArgNumber(),
                                                        kParamAttrName))
        diag << " '" << name.getValue() << "'";
    diag << " is stored in " << blocks << " blocks of "
         << (k + blocks - 1) / blocks << " along K, which " << shards
         << " ranks cannot split without cutting a block; its block of the "
            "model stays whole on every rank";
  }

  auto wholeQ = llvm::find_if(
      unfusedQ, [&](Operation *q) { return excluded.contains(q); });
  if (wholeQ != unfusedQ.end())
    mlir::emitWarning((*wholeQ)->getLoc())
        << "preset megatron: the projection at ONNX node '" << nodeName(*wholeQ)
        << "' (and any like it) is not split over '" << axisName
        << "': it fuses Q with fewer key/value heads than ranks, which stay "
           "whole on each rank, and Q does not split into whole heads on "
           "each rank either";
  if (unequal)
    mlir::emitWarning(unequal->getLoc())
        << "preset megatron: the projection sliced at ONNX node '"
        << nodeName(unequal) << "' (and any like it) is not split over '"
        << axisName
        << "': its output is cut into parts of unequal sizes (Q fused with "
           "fewer key/value heads), and not every part splits into whole "
           "heads on each rank";

  std::vector<ValueSharding> shardings;
  auto split = [&](Value value, int64_t rank, int64_t dim, std::string origin) {
    SplitAxes axes(rank);
    axes[dim].push_back(static_cast<int16_t>(*axis));
    shardings.push_back({value, axes, std::move(origin)});
  };
  // The token embedding (vocabularyLookups): split by vocabulary when the
  // axis divides it (cleave-localize-gathers then masks the lookups and
  // sums them over the axis, one all-reduce a run).
  for (auto [table, lookup] : vocabularyLookups(main)) {
    if (cast<RankedTensorType>(table.getType()).getDimSize(0) % shards != 0)
      continue;
    split(table, 2, 0,
          "preset megatron: vocabulary-parallel embedding at ONNX node '" +
              nodeName(lookup) + "'");
  }
  // A matmul's weight split along dimension `dim` of its right operand,
  // on the parameter itself where it is stored transposed.
  auto splitWeight = [&](Operation *matmul, int64_t dim, std::string origin) {
    Value operand = matmul->getOperand(1);
    auto [weight, weightDimension] = weightDim(operand, dim);
    for (auto [param, paramDim] : channelParameters(main, operand, dim, shards))
      split(param, cast<RankedTensorType>(param.getType()).getRank(), paramDim,
            origin + " (its scale or zero point)");
    // A weight read through a dequantization: the GEMM's operand too, or
    // propagation, deciding the GEMM first, gathers the weight to it.
    auto transpose = operand.getDefiningOp<linalg::TransposeOp>();
    if (weight != operand && !(transpose && transpose.getInput() == weight))
      split(operand, 2, dim, origin + " (dequantized)");
    split(weight, cast<RankedTensorType>(weight.getType()).getRank(),
          weightDimension, std::move(origin));
  };
  for (const SplitBlock &block : blocks) {
    bool head = block.rows.empty();
    for (Operation *op : block.columns)
      splitWeight(op, 1,
                  std::string("preset megatron: ") +
                      (head ? "vocabulary-parallel output projection"
                            : "column-parallel projection") +
                      " at ONNX node '" + nodeName(op) + "'");
    for (Operation *op : block.rows) {
      splitWeight(op, 0,
                  "preset megatron: row-parallel projection at ONNX node '" +
                      nodeName(op) + "'");
      // Where the block takes a range (a dynamic quantization of the
      // activation the GEMM reads), the GEMM's input is annotated: else
      // propagation, seeing that range taken whole, gathers it rather than
      // split the GEMM.
      Value lhs = op->getOperand(0);
      auto type = cast<RankedTensorType>(lhs.getType());
      if (!block.ranges.empty())
        split(lhs, type.getRank(), type.getRank() - 1,
              "preset megatron: quantized input of the row-parallel "
              "projection at ONNX node '" +
                  nodeName(op) + "'");
    }
    for (auto [param, dim] : block.biases)
      split(param, cast<RankedTensorType>(param.getType()).getRank(), dim,
            "preset megatron: bias of a column-parallel projection");
    for (auto [value, dim] : block.ranges)
      split(value, cast<RankedTensorType>(value.getType()).getRank(), dim,
            "preset megatron: a split tensor whose range is taken (a dynamic "
            "quantization) at ONNX node '" +
                nodeName(value.getDefiningOp()) + "'");
  }
  return shardings;
}
