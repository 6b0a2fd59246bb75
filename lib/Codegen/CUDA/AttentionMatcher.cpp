//===- AttentionMatcher.cpp - Finding attention the kernel can compute ---===//
//
// Walks from a scores GEMM on 16-bit operands through the ops the fuse phase
// leaves around attention (elementwise ops on the scores, softmax's four
// generics, the GEMM by V, the head merge's rounding) and checks each
// condition the one-kernel form needs: the same rows throughout, buffers
// only the attention touches, nothing between the members that reads or
// writes them. A failed condition declines the match; the GEMMs then go to
// the library as before.
//
//===----------------------------------------------------------------------===//

#include "AttentionMatcher.h"

#include "cleave/Codegen/BufferViews.h"
#include "cleave/Codegen/GpuKernelBuilder.h"

#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "cleave-attention-to-gpu"

using namespace mlir;
using namespace cleave::gpu_kernel;
using namespace cleave::attention;

namespace {

/// The readers and writers of `root` (through its views) that are not
/// views or deallocations.
SmallVector<Operation *> usersOf(Value root) {
  SmallVector<Operation *> users;
  for (Value view : cleave::viewsOf(root))
    for (Operation *user : view.getUsers())
      if (!cleave::viewSource(user) && !isa<memref::DeallocOp>(user))
        users.push_back(user);
  return users;
}

/// The one op of type OpTy among `users`, fills and `except` aside; null if
/// there is none, more than one, or another kind of op.
template <typename OpTy>
OpTy onlyOther(ArrayRef<Operation *> users, ArrayRef<Operation *> except) {
  OpTy found;
  for (Operation *user : users) {
    if (llvm::is_contained(except, user) || isa<linalg::FillOp>(user))
      continue;
    auto op = dyn_cast<OpTy>(user);
    if (!op || found)
      return OpTy();
    found = op;
  }
  return found;
}

/// (d0, ..., d(n-2)) of n loops: a row's value, the last loop reduced.
AffineMap leading(unsigned n, MLIRContext *ctx) {
  SmallVector<AffineExpr> dims;
  for (unsigned d = 0; d + 1 < n; ++d)
    dims.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(n, 0, dims, ctx);
}

/// Whether `map` is the identity on `loops` loops.
bool isIdentityOn(AffineMap map, unsigned loops) {
  return map.isIdentity() && map.getNumDims() == loops;
}

/// Whether `op`'s body is the ops `names` in order and their last result
/// yielded: the first reading (in0, in1), each next one the previous
/// result (as its first operand).
bool bodyIs(linalg::GenericOp op, ArrayRef<StringRef> names) {
  Block &body = op.getRegion().front();
  auto ops = body.without_terminator();
  if (static_cast<size_t>(std::distance(ops.begin(), ops.end())) !=
      names.size())
    return false;
  Value last;
  for (auto [inner, name] : llvm::zip(ops, names)) {
    if (inner.getName().getStringRef() != name || inner.getNumResults() != 1)
      return false;
    if (!last) {
      if (inner.getNumOperands() != 2 ||
          inner.getOperand(0) != body.getArgument(0) ||
          inner.getOperand(1) != body.getArgument(1))
        return false;
    } else if (inner.getOperand(0) != last) {
      return false;
    }
    last = inner.getResult(0);
  }
  return body.getTerminator()->getOperand(0) == last;
}

/// The element type both of a GEMM's inputs have, when it is 16-bit, and
/// its output float32.
FloatType halfInputs(linalg::LinalgOp op) {
  auto in0 = dyn_cast<MemRefType>(op.getDpsInputOperand(0)->get().getType());
  auto in1 = dyn_cast<MemRefType>(op.getDpsInputOperand(1)->get().getType());
  auto out = dyn_cast<MemRefType>(op.getDpsInitOperand(0)->get().getType());
  if (!in0 || !in1 || !out || in0.getElementType() != in1.getElementType() ||
      !out.getElementType().isF32() ||
      !(in0.getElementType().isBF16() || in0.getElementType().isF16()))
    return FloatType();
  return cast<FloatType>(in0.getElementType());
}

/// Whether `read` and `written` view one buffer's elements in the same
/// order, rows of the same (queries, keys) or (queries, columns) in the
/// last two dimensions: the same view, or both row-major reshapes of it
/// that differ only in how the leading dimensions split (batch x heads
/// merged; grouped-query attention's (key/value heads, group) as heads).
bool sameRows(Value read, Value written) {
  if (cleave::viewedBuffer(read) != cleave::viewedBuffer(written))
    return false;
  if (read.getType() == written.getType())
    return true;
  auto r = dyn_cast<MemRefType>(read.getType());
  auto w = dyn_cast<MemRefType>(written.getType());
  return r && w && r.getRank() >= 2 && w.getRank() >= 2 &&
         memref::isStaticShapeAndContiguousRowMajor(r) &&
         memref::isStaticShapeAndContiguousRowMajor(w) &&
         r.getNumElements() == w.getNumElements() &&
         r.getShape().take_back(2) == w.getShape().take_back(2);
}

/// Whether `reader` reads `op`'s output at its own point, in its rows.
bool readsOutput(linalg::LinalgOp op, linalg::GenericOp reader, OpOperand &in) {
  return sameRows(in.get(), op.getDpsInitOperand(0)->get()) &&
         isIdentityOn(reader.getMatchingIndexingMap(&in), reader.getNumLoops());
}

/// The GEMM output map's results as loops: (rows..., m, n) in C's order.
std::optional<SmallVector<unsigned>> outputLoops(linalg::LinalgOp op,
                                                 const cleave::GemmLoops &g) {
  AffineMap c = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  SmallVector<unsigned> loops;
  for (AffineExpr e : c.getResults())
    loops.push_back(cast<AffineDimExpr>(e).getPosition());
  if (loops.size() != g.batch.size() + 2 || loops[loops.size() - 2] != g.m ||
      loops.back() != g.n)
    return std::nullopt;
  return loops;
}

class Matcher {
public:
  explicit Matcher(linalg::LinalgOp scores) { a.scores = scores; }

  /// Declines the match; -debug-only=cleave-attention-to-gpu says why.
  std::nullopt_t decline(const llvm::Twine &why) {
    LLVM_DEBUG(llvm::dbgs()
               << DEBUG_TYPE ": scores GEMM at " << a.scores->getLoc()
               << " not matched: " << why << "\n");
    return std::nullopt;
  }

  std::optional<Attention> match() {
    linalg::LinalgOp g1 = a.scores;
    std::optional<cleave::GemmLoops> q = cleave::gemmLoops(g1);
    if (!q || !(a.half = halfInputs(g1)))
      return decline("not a GEMM of 16-bit operands into float32");
    a.q = *q;
    std::optional<SmallVector<unsigned>> rowLoops = outputLoops(g1, *q);
    if (!rowLoops)
      return decline("the output's loops are not (rows..., m, n)");
    SmallVector<int64_t> ranges = g1.getStaticLoopRanges();
    int64_t entries = 1; // (batch, head) entries: the GEMM's batch
    for (unsigned loop : ArrayRef(*rowLoops).drop_back(2))
      entries *= ranges[loop];
    a.queries = ranges[q->m];
    a.keys = ranges[q->n];
    a.depth = ranges[q->k];
    // The softmax's loops: (batch..., queries, keys), its batch the GEMM's
    // in order, perhaps split otherwise (grouped-query attention's scores
    // GEMM runs over key/value heads and their groups, the softmax over
    // query heads).
    Value scores = g1.getDpsInitOperand(0)->get();
    linalg::GenericOp first; // the scores' first reader
    for (Operation *user : usersOf(cleave::viewedBuffer(scores)))
      if (auto g = dyn_cast<linalg::GenericOp>(user);
          g && user != g1.getOperation() &&
          (!first || g->isBeforeInBlock(first)))
        first = g;
    if (!first)
      return decline("no generic reads the scores");
    SmallVector<int64_t> chainRanges = first.getStaticLoopRanges();
    if (chainRanges.size() < 3 ||
        ArrayRef(chainRanges).take_back(2) != ArrayRef({a.queries, a.keys}))
      return decline("the scores' reader is not over (..., queries, keys)");
    a.batch.assign(chainRanges.begin(), chainRanges.end() - 2);
    int64_t chainEntries = 1;
    for (int64_t size : a.batch)
      chainEntries *= size;
    if (chainEntries != entries)
      return decline("the softmax's batch differs from the GEMM's");

    // Elementwise ops on the scores, then the softmax.
    linalg::LinalgOp producer = g1;
    Value scoresRoot = cleave::viewedBuffer(g1.getDpsInitOperand(0)->get());
    a.internal.push_back(scoresRoot);
    while (true) {
      Value root = cleave::viewedBuffer(producer.getDpsInitOperand(0)->get());
      auto reader = onlyOther<linalg::GenericOp>(usersOf(root), {producer});
      if (reader) { // one reader: an elementwise op on the scores
        if (!elementwise(reader, producer, chainRanges))
          return decline(
              "an op on the scores is not elementwise in their rows");
        a.prelude.push_back(reader);
        producer = reader;
        a.internal.push_back(cleave::viewedBuffer(reader.getDpsInits()[0]));
        continue;
      }
      if (!softmax(producer, chainRanges))
        return decline("no softmax (max, exp, sum, rounded division) follows");
      break;
    }
    if (!valuesGemm())
      return decline("the probabilities are not one GEMM's 16-bit operand");
    if (!collectFills())
      return decline("a buffer of the attention is filled for another op too");
    if (!safeBetween())
      return decline("an op between the members touches their buffers");
    LLVM_DEBUG(llvm::dbgs()
               << DEBUG_TYPE ": attention at " << a.scores->getLoc() << ": "
               << a.queries << " queries, " << a.keys << " keys, depth "
               << a.depth << ", width " << a.width << "\n");
    return a;
  }

private:
  Attention a;

  /// An all-parallel generic over the scores' points that reads
  /// `producer`'s output there, nowhere else, and writes one output there.
  bool elementwise(linalg::GenericOp op, linalg::LinalgOp producer,
                   ArrayRef<int64_t> ranges) {
    if (op.getNumParallelLoops() != op.getNumLoops() ||
        op.getStaticLoopRanges() != ranges || op.getNumDpsInits() != 1 ||
        !isIdentityOn(op.getIndexingMapsArray().back(), op.getNumLoops()) ||
        !isa<MemRefType>(op.getDpsInits()[0].getType()) ||
        !cast<MemRefType>(op.getDpsInits()[0].getType())
             .getElementType()
             .isF32() ||
        !op.getMatchingBlockArgument(op.getDpsInitOperand(0)).use_empty())
      return false;
    int reads = 0;
    for (OpOperand *in : op.getDpsInputOperands())
      if (isa<MemRefType>(in->get().getType()) &&
          cleave::viewedBuffer(in->get()) ==
              cleave::viewedBuffer(producer.getDpsInitOperand(0)->get())) {
        if (!readsOutput(producer, op, *in))
          return false;
        ++reads;
      }
    return reads == 1;
  }

  /// Softmax over the keys of `producer`'s output: its maximum, the
  /// exponential of each minus it, their sum, each divided by it and
  /// rounded to 16 bits.
  bool softmax(linalg::LinalgOp producer, ArrayRef<int64_t> ranges) {
    Value x = cleave::viewedBuffer(producer.getDpsInitOperand(0)->get());
    SmallVector<linalg::GenericOp> readers;
    for (Operation *user : usersOf(x))
      if (user != producer.getOperation() && !isa<linalg::FillOp>(user)) {
        auto g = dyn_cast<linalg::GenericOp>(user);
        if (!g)
          return false;
        readers.push_back(g);
      }
    if (readers.size() != 2)
      return false;
    // The maximum first, then the exponential (block order).
    if (readers[1]->isBeforeInBlock(readers[0]))
      std::swap(readers[0], readers[1]);
    a.max = readers[0];
    a.exp = readers[1];
    auto rowReduction = [&](linalg::GenericOp op, Value in,
                            ArrayRef<StringRef> combiners) {
      std::optional<Combiner> c = findCombiner(op);
      unsigned n = ranges.size();
      return c && op.getStaticLoopRanges() == ranges &&
             op.getNumReductionLoops() == 1 &&
             op.getIteratorTypesArray().back() ==
                 utils::IteratorType::reduction &&
             op.getNumDpsInputs() == 1 && sameRows(op.getDpsInputs()[0], in) &&
             isIdentityOn(op.getIndexingMapsArray()[0], n) &&
             op.getIndexingMapsArray()[1] == leading(n, op.getContext()) &&
             c->partial == op.getRegion().front().getArgument(0) &&
             llvm::is_contained(combiners, c->op->getName().getStringRef());
    };
    // An elementwise op of the scores' points and their rows' values, with
    // `body` (any body that does not read its output, when empty).
    auto rowBroadcast = [&](linalg::GenericOp op, Value in, Value row,
                            ArrayRef<StringRef> body) {
      unsigned n = ranges.size();
      SmallVector<AffineMap> maps = op.getIndexingMapsArray();
      return op.getNumParallelLoops() == n &&
             op.getStaticLoopRanges() == ranges && op.getNumDpsInputs() == 2 &&
             sameRows(op.getDpsInputs()[0], in) &&
             op.getDpsInputs()[1] == row && isIdentityOn(maps[0], n) &&
             isIdentityOn(maps[2], n) &&
             maps[1] == leading(n, op.getContext()) &&
             (body.empty()
                  ? op.getMatchingBlockArgument(op.getDpsInitOperand(0))
                        .use_empty()
                  : bodyIs(op, body));
    };
    Value xView = producer.getDpsInitOperand(0)->get();
    Value m = a.max.getDpsInits()[0];
    if (!rowReduction(a.max, xView, {"arith.maximumf", "arith.maxnumf"}) ||
        !rowBroadcast(a.exp, xView, m, {"arith.subf", "math.exp"}))
      return false;
    Value e = a.exp.getDpsInits()[0];
    SmallVector<Operation *> eReaders = usersOf(cleave::viewedBuffer(e));
    llvm::erase(eReaders, a.exp.getOperation());
    if (eReaders.size() != 2)
      return false;
    a.sum = dyn_cast<linalg::GenericOp>(eReaders[0]);
    a.normalize = dyn_cast<linalg::GenericOp>(eReaders[1]);
    if (!a.sum || !a.normalize)
      return false;
    if (a.normalize->isBeforeInBlock(a.sum))
      std::swap(a.sum, a.normalize);
    Value l = a.sum.getDpsInits()[0];
    if (!rowReduction(a.sum, e, {"arith.addf"}) ||
        !rowBroadcast(a.normalize, e, l, {}) ||
        !a.normalize.getRegion().getOps<linalg::IndexOp>().empty() ||
        cast<MemRefType>(a.normalize.getDpsInits()[0].getType())
                .getElementType() != a.half)
      return false;
    // collectFills checks that nothing else touches them.
    for (Value buffer : {m, e, l, a.normalize.getDpsInits()[0]})
      a.internal.push_back(cleave::viewedBuffer(buffer));
    return true;
  }

  /// The GEMM of the probabilities by V, and an elementwise rounding of its
  /// result when that is all that reads it.
  bool valuesGemm() {
    Value p = cleave::viewedBuffer(a.normalize.getDpsInits()[0]);
    auto g2 = onlyOther<linalg::LinalgOp>(usersOf(p), {a.normalize});
    if (!g2)
      return false;
    std::optional<cleave::GemmLoops> v = cleave::gemmLoops(g2);
    if (!v || halfInputs(g2) != a.half)
      return false;
    a.values = g2;
    a.v = *v;
    std::optional<SmallVector<unsigned>> rowLoops = outputLoops(g2, *v);
    SmallVector<int64_t> ranges = g2.getStaticLoopRanges();
    if (!rowLoops || ranges[v->m] != a.queries || ranges[v->k] != a.keys)
      return false;
    a.width = ranges[v->n];
    // P is read as the normalization wrote it, with the same rows (its batch
    // possibly merged or split otherwise: the same linear batch entry), at
    // (batch..., m, k).
    OpOperand *pIn = probabilities();
    if (!pIn || !sameRows(pIn->get(), a.normalize.getDpsInits()[0]))
      return false;
    SmallVector<AffineExpr> expected;
    for (unsigned loop : ArrayRef(*rowLoops).drop_back(1))
      expected.push_back(getAffineDimExpr(loop, g2.getContext()));
    expected.push_back(getAffineDimExpr(v->k, g2.getContext()));
    if (g2.getMatchingIndexingMap(pIn).getResults() != ArrayRef(expected))
      return false;
    // A rounding of the output, if it is the output's one reader.
    Value out = g2.getDpsInitOperand(0)->get();
    auto reader =
        onlyOther<linalg::GenericOp>(usersOf(cleave::viewedBuffer(out)), {g2});
    if (reader && reader.getNumDpsInputs() == 1 &&
        reader.getNumDpsInits() == 1 &&
        reader.getNumParallelLoops() == reader.getNumLoops() &&
        readsOutput(g2, reader, *reader.getDpsInputOperand(0)) &&
        cast<MemRefType>(reader.getDpsInits()[0].getType()).getElementType() ==
            a.half) {
      Block &body = reader.getRegion().front();
      auto trunc =
          body.getTerminator()->getOperand(0).getDefiningOp<arith::TruncFOp>();
      if (trunc && trunc.getIn() == body.getArgument(0) &&
          body.getOperations().size() == 2) {
        a.rounding = reader;
        a.internal.push_back(cleave::viewedBuffer(out));
      }
    }
    return a.depth % 8 == 0 && a.width % 8 == 0 && a.depth <= 256 &&
           a.width <= 256 && a.queries >= kRowsPerWarp;
  }

  OpOperand *probabilities() {
    Value p = cleave::viewedBuffer(a.normalize.getDpsInits()[0]);
    for (OpOperand *in : a.values.getDpsInputOperands())
      if (cleave::viewedBuffer(in->get()) == p)
        return in;
    return nullptr;
  }

  /// The fills of the internal buffers (and of the output, which the kernel
  /// writes whole), which go with the attention; none of them may be read
  /// by anything else.
  bool collectFills() {
    SmallVector<Operation *> members = a.members();
    SmallVector<Value> roots(a.internal);
    roots.push_back(cleave::viewedBuffer(a.values.getDpsInitOperand(0)->get()));
    for (Value root : roots)
      for (Operation *user : usersOf(root)) {
        bool isOutput = root == roots.back();
        if (isa<linalg::FillOp>(user)) {
          // The output's fills after the GEMM are another use of its buffer.
          if (!llvm::is_contained(a.fills, user) &&
              !(isOutput && a.values->isBeforeInBlock(user)))
            a.fills.push_back(user);
          continue;
        }
        if (!llvm::is_contained(members, user) && !isOutput)
          return false;
      }
    // The output's fill must be the last write before the GEMM (its zeros).
    for (Operation *fill : a.fills)
      if (cleave::viewedBuffer(cast<linalg::FillOp>(fill).getDpsInits()[0]) ==
              roots.back() &&
          !cleave::isZeroFill(fill))
        return false;
    return true;
  }

  /// Whether the kernel, placed at the second GEMM, reads what the ops it
  /// replaces read: nothing between the first GEMM and the last member
  /// writes their inputs, and every member and fill is in one block.
  bool safeBetween() {
    SmallVector<Operation *> members = a.members();
    Operation *first = a.scores;
    Operation *last = members.back();
    for (Operation *op : llvm::concat<Operation *const>(members, a.fills))
      if (op->getBlock() != first->getBlock())
        return false;
    for (Operation *op : members)
      if (op->isBeforeInBlock(first) || last->isBeforeInBlock(op))
        return false;
    DenseSet<Value> inputs;
    for (Operation *op : members)
      for (OpOperand *in : cast<linalg::LinalgOp>(op).getDpsInputOperands())
        if (isa<MemRefType>(in->get().getType()))
          inputs.insert(cleave::viewedBuffer(in->get()));
    for (Operation *op = first->getNextNode(); op && op != last;
         op = op->getNextNode()) {
      if (llvm::is_contained(members, op) || llvm::is_contained(a.fills, op) ||
          isa<memref::AllocOp, memref::DeallocOp>(op) ||
          cleave::viewSource(op) || isMemoryEffectFree(op))
        continue;
      auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
      if (!linalgOp)
        return false;
      for (Value out : linalgOp.getDpsInits())
        if (inputs.contains(cleave::viewedBuffer(out)))
          return false;
    }
    return true;
  }
};

} // namespace

std::optional<Attention>
cleave::attention::matchAttention(linalg::LinalgOp scores) {
  return Matcher(scores).match();
}
