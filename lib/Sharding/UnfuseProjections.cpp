//===- UnfuseProjections.cpp - A fused projection as one GEMM a part ------===//
//
// Exporters fuse attention's Q, K and V projections into one GEMM by one
// weight and cut its output into column ranges (a Split, Slices, Falcon's
// reshape to heads and Slice of them). Where the parts split alike over the
// ranks, the megatron preset stores the weight reordered (see
// cleave-split-fused-projections). Where they do not (Q of many heads
// beside a single key/value head), one parameter cannot carry a split for Q
// and a whole K and V: the rewrite here gives each part a GEMM of its own,
// by a parameter that is a block of the model's (its columns, recorded in
// `cleave.param_block`, and written by the bundle from the model's tensor),
// so that the preset splits Q by heads and keeps the key/value head whole,
// as for a model that had separate projections. cleave-join-projections
// later joins each rank's parts back into one GEMM.
//
// What is rewritten: a matmul by a 2-D parameter (or its transpose), then
// single-use ops that keep the output's last dimension whole (reshapes,
// elementwise ops such as a bias add), then, at the fork, only reshapes that
// keep the last dimension, ending in slices of column ranges: a slice of the
// last dimension, or a slice of whole heads after an expand of the last
// dimension into (heads, head size).
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/Plan.h"
#include "cleave/Support/Attributes.h"
#include "cleave/Support/Parameters.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/BitVector.h"

#include <map>

using namespace mlir;
using namespace cleave;

namespace {

/// How many of `map`'s results read loop `loop`.
int64_t readsOfLoop(AffineMap map, unsigned loop) {
  return llvm::count_if(map.getResults(),
                        [&](AffineExpr e) { return e.isFunctionOfDim(loop); });
}

/// Whether `map` sends the last loop to its last result.
bool keepsLastLoop(AffineMap map, unsigned lastLoop) {
  if (map.getNumResults() == 0)
    return false;
  auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
  return last && last.getPosition() == lastLoop;
}

/// Whether a reshape keeps its last dimension as a dimension of its own:
/// the last group's other dimensions (on the expanded side) are all 1 (a
/// decoding step's [batch, n] to [batch, 1, n]).
bool keepsLastDim(Operation *op) {
  auto onlyUnitsBefore = [](ReassociationIndices group,
                            RankedTensorType expanded) {
    return llvm::all_of(ArrayRef<int64_t>(group).drop_back(),
                        [&](int64_t d) { return expanded.getDimSize(d) == 1; });
  };
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op))
    return onlyUnitsBefore(expand.getReassociationIndices().back(),
                           expand.getResultType());
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op))
    return onlyUnitsBefore(collapse.getReassociationIndices().back(),
                           collapse.getSrcType());
  return false;
}

/// Whether a slice takes everything of `source` but a range of dimension
/// `dim`, at stride 1, and keeps the rank.
bool slicesOnly(tensor::ExtractSliceOp slice, int64_t dim) {
  RankedTensorType type = slice.getSourceType();
  if (slice.getResultType().getRank() != type.getRank() ||
      !slice.getOffsets().empty() || !slice.getSizes().empty() ||
      !slice.getStrides().empty())
    return false;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (slice.getStaticStrides()[d] != 1)
      return false;
    if (d != dim && (slice.getStaticOffsets()[d] != 0 ||
                     slice.getStaticSizes()[d] != type.getDimSize(d)))
      return false;
  }
  return true;
}

/// Where one part of the fused output is read: a slice reached from the
/// fork through `path` (reshapes that keep the last dimension), directly or
/// through `heads`, an expand of the last dimension into (heads, head size).
struct Leaf {
  SmallVector<Operation *> path;
  tensor::ExpandShapeOp heads;
  tensor::ExtractSliceOp slice;
  int64_t offset = 0, size = 0; // columns of the fused output
};

class Unfuser {
public:
  Unfuser(func::FuncOp main, linalg::MatmulOp matmul)
      : main(main), matmul(matmul) {}

  /// Checks the pattern; fills the fields below.
  bool match() {
    Value rhs = matmul.getInputs()[1];
    if ((transpose = rhs.getDefiningOp<linalg::TransposeOp>())) {
      if (!transpose->hasOneUse() ||
          transpose.getPermutation() != ArrayRef<int64_t>{1, 0})
        return false;
      rhs = transpose.getInput();
      columnsDim = 0;
    }
    weight = parameterArgument(main, rhs);
    if (!weight || cast<RankedTensorType>(weight.getType()).getRank() != 2)
      return false;
    // Single-use ops that keep the last dimension, up to the fork.
    fork = matmul.getResult(0);
    while (fork.hasOneUse()) {
      Operation *user = *fork.getUsers().begin();
      if (keepsLastDim(user)) {
        chain.push_back(user);
        fork = user->getResult(0);
        continue;
      }
      auto generic = dyn_cast<linalg::GenericOp>(user);
      if (!generic || generic.getNumResults() != 1 ||
          generic.getNumReductionLoops() != 0 || !elementwise(generic))
        break;
      chain.push_back(user);
      fork = generic.getResult(0);
    }
    if (!collectLeaves(fork, {}))
      return false;
    // Parts of the same columns share one GEMM; parts may not overlap.
    for (const Leaf &leaf : leaves) {
      auto [it, inserted] = parts.insert({leaf.offset, leaf.size});
      if (!inserted && it->second != leaf.size)
        return false;
    }
    int64_t end = 0;
    for (auto [offset, size] : parts) {
      if (offset < end)
        return false;
      end = offset + size;
    }
    // Parts of one size split alike: stored reordered instead.
    return llvm::any_of(
        parts, [&](auto part) { return part.second != parts.begin()->second; });
  }

  /// The parameters the rewrite replaces (the weight, biases in the chain).
  SmallVector<BlockArgument> parameters() {
    SmallVector<BlockArgument> list = {weight};
    for (Operation *op : chain)
      for (Value v : op->getOperands())
        if (BlockArgument param = parameterArgument(main, v))
          list.push_back(param);
    return list;
  }

  /// Whether the rewrite would replace a value of `values`: a parameter it
  /// replaces, or a result of an op it erases.
  bool replacesAny(const llvm::DenseSet<Value> &values) {
    auto named = [&](Operation *op) {
      return op && llvm::any_of(op->getResults(),
                                [&](Value v) { return values.contains(v); });
    };
    if (llvm::any_of(parameters(),
                     [&](Value v) { return values.contains(v); }) ||
        named(matmul) || named(transpose) || llvm::any_of(chain, named))
      return true;
    return llvm::any_of(leaves, [&](const Leaf &leaf) {
      return named(leaf.slice) || named(leaf.heads) ||
             llvm::any_of(leaf.path, named);
    });
  }

  /// Gives each part a GEMM of its own; erases what is left unused.
  /// Returns the new GEMMs in column order.
  SmallVector<Operation *> rewrite() {
    OpBuilder b(matmul);
    std::map<int64_t, Value> partEnd; // by offset: the part at the fork
    SmallVector<Operation *> gemms;
    b.setInsertionPointAfter(fork.getDefiningOp());
    for (auto [offset, size] : parts)
      partEnd[offset] = buildPart(b, offset, size, gemms);
    for (Leaf &leaf : leaves) {
      Value value = partEnd[leaf.offset];
      b.setInsertionPoint(leaf.slice);
      for (Operation *op : leaf.path)
        value = reshapeLike(b, op, value, leaf.size);
      if (leaf.heads) {
        auto type = leaf.slice.getResultType();
        value =
            tensor::ExpandShapeOp::create(b, leaf.slice.getLoc(), type, value,
                                          leaf.heads.getReassociationIndices());
      }
      leaf.slice.getResult().replaceAllUsesWith(value);
    }
    // The old ops, consumers first; then the old parameters.
    SmallVector<Operation *> old;
    for (Leaf &leaf : leaves) {
      old.push_back(leaf.slice);
      if (leaf.heads)
        old.push_back(leaf.heads);
      for (Operation *op : llvm::reverse(leaf.path))
        old.push_back(op);
    }
    for (Operation *op : llvm::reverse(chain))
      old.push_back(op);
    old.push_back(matmul);
    if (transpose)
      old.push_back(transpose);
    SmallVector<BlockArgument> params = parameters();
    llvm::SmallPtrSet<Operation *, 16> erased;
    for (Operation *op : old)
      if (!erased.contains(op) && op->use_empty()) {
        erased.insert(op);
        op->erase();
      }
    llvm::BitVector unused(main.getNumArguments());
    for (BlockArgument param : params)
      if (param.use_empty())
        unused.set(param.getArgNumber());
    (void)main.eraseArguments(unused);
    return gemms;
  }

private:
  /// Elementwise over the last loop: every operand indexes it last or not at
  /// all, the output last.
  bool elementwise(linalg::GenericOp generic) {
    unsigned lastLoop = generic.getNumLoops() - 1;
    SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
    if (!keepsLastLoop(maps.back(), lastLoop))
      return false;
    return llvm::all_of(maps, [&](AffineMap map) {
      int64_t reads = readsOfLoop(map, lastLoop);
      return reads == 0 || (reads == 1 && keepsLastLoop(map, lastLoop));
    });
  }

  bool collectLeaves(Value value, SmallVector<Operation *> path) {
    int64_t last = cast<RankedTensorType>(value.getType()).getRank() - 1;
    for (Operation *user : value.getUsers()) {
      if (keepsLastDim(user)) {
        SmallVector<Operation *> longer(path);
        longer.push_back(user);
        if (!collectLeaves(user->getResult(0), longer))
          return false;
        continue;
      }
      if (auto slice = dyn_cast<tensor::ExtractSliceOp>(user)) {
        if (!slicesOnly(slice, last))
          return false;
        leaves.push_back({path, nullptr, slice, slice.getStaticOffsets()[last],
                          slice.getStaticSizes()[last]});
        continue;
      }
      auto expand = dyn_cast<tensor::ExpandShapeOp>(user);
      if (!expand || expand.getReassociationIndices().back().size() != 2)
        return false;
      int64_t headDim = expand.getResultType().getRank() - 2;
      int64_t headSize = expand.getResultType().getDimSize(headDim + 1);
      for (Operation *sliceUser : expand->getUsers()) {
        auto slice = dyn_cast<tensor::ExtractSliceOp>(sliceUser);
        if (!slice || !slicesOnly(slice, headDim))
          return false;
        leaves.push_back({path, expand, slice,
                          slice.getStaticOffsets()[headDim] * headSize,
                          slice.getStaticSizes()[headDim] * headSize});
      }
    }
    return true;
  }

  /// `type` with its last dimension `size`.
  static RankedTensorType narrowType(Type type, int64_t size) {
    auto ranked = cast<RankedTensorType>(type);
    SmallVector<int64_t> shape(ranked.getShape());
    shape.back() = size;
    return RankedTensorType::get(shape, ranked.getElementType());
  }

  /// A parameter that is columns [offset, offset + size) of `param` along
  /// its dimension `dim`: a new argument after it, or the one an earlier
  /// rewrite made of the same block.
  BlockArgument block(BlockArgument param, int64_t dim, int64_t offset,
                      int64_t size) {
    auto type = cast<RankedTensorType>(param.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] = size;
    NamedAttrList attrs(main.getArgAttrDict(param.getArgNumber()));
    Builder b(main.getContext());
    attrs.set(kParamBlockAttrName, b.getDenseI64ArrayAttr({dim, offset}));
    // A parameter shared by several projections (exporters keep one copy of
    // equal initializers: zero biases) gives each of them the same blocks.
    DictionaryAttr dict = attrs.getDictionary(main.getContext());
    auto blockType = RankedTensorType::get(shape, type.getElementType());
    for (BlockArgument arg : main.getArguments())
      if (arg.getType() == blockType &&
          main.getArgAttrDict(arg.getArgNumber()) == dict)
        return arg;
    unsigned index = param.getArgNumber() + 1;
    while (index < main.getNumArguments() &&
           main.getArgAttr(index, kParamBlockAttrName))
      ++index;
    (void)main.insertArgument(index, blockType, dict, param.getLoc());
    return main.getArgument(index);
  }

  /// `value`'s columns [offset, offset + size) along its last dimension:
  /// made anew where it is an empty tensor, a fill or a parameter.
  Value narrowed(OpBuilder &b, Value value, int64_t offset, int64_t size) {
    auto type = cast<RankedTensorType>(value.getType());
    RankedTensorType narrow = narrowType(type, size);
    Location loc = value.getLoc();
    if (value.getDefiningOp<tensor::EmptyOp>())
      return tensor::EmptyOp::create(b, loc, narrow.getShape(),
                                     narrow.getElementType());
    if (auto fill = value.getDefiningOp<linalg::FillOp>();
        fill && fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>()) {
      Value empty = tensor::EmptyOp::create(b, loc, narrow.getShape(),
                                            narrow.getElementType());
      return linalg::FillOp::create(b, loc, fill.getInputs()[0], empty)
          .getResult(0);
    }
    if (BlockArgument param = parameterArgument(main, value))
      return block(param, type.getRank() - 1, offset, size);
    int64_t rank = type.getRank();
    SmallVector<int64_t> offsets(rank, 0), sizes(narrow.getShape()),
        strides(rank, 1);
    offsets.back() = offset;
    return tensor::ExtractSliceOp::create(b, loc, narrow, value, ValueRange{},
                                          ValueRange{}, ValueRange{}, offsets,
                                          sizes, strides);
  }

  /// A reshape like `op` (keeping the last dimension) of `value`.
  static Value reshapeLike(OpBuilder &b, Operation *op, Value value,
                           int64_t size) {
    RankedTensorType type = narrowType(op->getResult(0).getType(), size);
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op))
      return tensor::ExpandShapeOp::create(b, op->getLoc(), type, value,
                                           expand.getReassociationIndices());
    auto collapse = cast<tensor::CollapseShapeOp>(op);
    return tensor::CollapseShapeOp::create(b, op->getLoc(), type, value,
                                           collapse.getReassociationIndices());
  }

  /// The GEMM of columns [offset, offset + size) and the chain after it.
  Value buildPart(OpBuilder &b, int64_t offset, int64_t size,
                  SmallVectorImpl<Operation *> &gemms) {
    Location loc = matmul.getLoc();
    BlockArgument part = block(weight, columnsDim, offset, size);
    Value rhs = part;
    if (transpose) {
      auto type = cast<RankedTensorType>(part.getType());
      Value empty = tensor::EmptyOp::create(
          b, loc, {type.getDimSize(1), type.getDimSize(0)},
          type.getElementType());
      rhs = linalg::TransposeOp::create(b, transpose.getLoc(), part, empty,
                                        transpose.getPermutation())
                ->getResult(0);
    }
    Value init = narrowed(b, matmul.getOutputs()[0], offset, size);
    Operation *gemm = b.clone(*matmul);
    gemm->setOperand(1, rhs);
    gemm->setOperand(2, init);
    gemm->getResult(0).setType(narrowType(gemm->getResult(0).getType(), size));
    gemms.push_back(gemm);
    // `value` is this part's `old`: the chain, op by op.
    Value value = gemm->getResult(0), old = matmul.getResult(0);
    for (Operation *op : chain) {
      if (keepsLastDim(op)) {
        value = reshapeLike(b, op, value, size);
        old = op->getResult(0);
        continue;
      }
      auto generic = cast<linalg::GenericOp>(op);
      unsigned lastLoop = generic.getNumLoops() - 1;
      SmallVector<Value> operands;
      for (OpOperand &operand : generic->getOpOperands()) {
        AffineMap map = generic.getMatchingIndexingMap(&operand);
        if (operand.get() == old)
          operands.push_back(value);
        else if (readsOfLoop(map, lastLoop) > 0)
          operands.push_back(narrowed(b, operand.get(), offset, size));
        else
          operands.push_back(operand.get());
      }
      Operation *clone = b.clone(*op);
      clone->setOperands(operands);
      clone->getResult(0).setType(narrowType(op->getResult(0).getType(), size));
      value = clone->getResult(0);
      old = op->getResult(0);
    }
    return value;
  }

  func::FuncOp main;
  linalg::MatmulOp matmul;
  linalg::TransposeOp transpose;
  BlockArgument weight;
  int64_t columnsDim = 1; // the weight's dimension of the GEMM's columns
  SmallVector<Operation *> chain;
  Value fork;
  SmallVector<Leaf> leaves;
  std::map<int64_t, int64_t> parts; // offset -> size, in column order
};

} // namespace

SmallVector<Operation *>
cleave::unfuseProjection(func::FuncOp main, Operation *matmul,
                         const llvm::DenseSet<Value> &fixed) {
  auto op = dyn_cast<linalg::MatmulOp>(matmul);
  if (!op)
    return {};
  Unfuser unfuser(main, op);
  if (!unfuser.match())
    return {};
  if (unfuser.replacesAny(fixed))
    return {};
  return unfuser.rewrite();
}
