//===- AttentionToGpu.cpp - Attention as one tensor-core kernel -----------===//
//
// See Passes.td. The attention AttentionMatcher.cpp finds on 16-bit
// operands as the fuse phase leaves it (the scores GEMM, elementwise ops on
// the scores, softmax as a maximum, an exponential, a sum and a division
// rounded to 16 bits, the GEMM of the probabilities by V) becomes one
// gpu.launch in the manner of
// FlashAttention: a block per 64 queries of one batch entry and head, a
// warp per 16 queries, the keys visited 16 at a time with a running maximum
// and sum (each step's keys of K and V staged in shared memory by the whole
// block and read by the warps with ldmatrix), both GEMMs on tensor cores
// (mma.sync m16n8k16), so that the scores never reach global memory.
//
//===----------------------------------------------------------------------===//

#include "AttentionMatcher.h"

#include "cleave/Codegen/CUDA/Passes.h"
#include "cleave/Support/Attributes.h"

#include "cleave/Codegen/BufferViews.h"
#include "cleave/Support/Gemms.h"
#include "cleave/Codegen/GpuKernelBuilder.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <limits>

namespace cleave {
#define GEN_PASS_DEF_CLEAVEATTENTIONTOGPU
#include "cleave/Codegen/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave::gpu_kernel;
using namespace cleave::attention;

namespace {

/// The kernel for one matched attention.
class KernelBuilder {
public:
  KernelBuilder(Attention a, OpBuilder &b, Location loc)
      : a(std::move(a)), b(b), loc(loc) {}

  void build() {
    int64_t rows = 1;
    for (int64_t s : a.batch)
      rows *= s;
    int64_t tile = kWarps * kRowsPerWarp;
    int64_t tiles = (a.queries + tile - 1) / tile;
    auto shared = gpu::AddressSpaceAttr::get(b.getContext(),
                                             gpu::AddressSpace::Workgroup);
    auto tileType = [&](int64_t cols) {
      return MemRefType::get({kKeys, cols + kPad}, a.half,
                             MemRefLayoutAttrInterface(), shared);
    };
    gpu::LaunchOp kernel = launch(
        b, loc, rows * tiles, kWarps * 32,
        [&](OpBuilder &kb, Value block, Value thread) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(kb.getInsertionBlock(), kb.getInsertionPoint());
          auto self = cast<gpu::LaunchOp>(kb.getBlock()->getParentOp());
          kTile = self.getWorkgroupAttributions()[0];
          vTile = self.getWorkgroupAttributions()[1];
          body(block, thread, rows, tiles);
        },
        TypeRange{tileType(deepSteps() * 16), tileType(a.width)});
    kernel->setAttr(cleave::kKernelKindAttrName, b.getStringAttr("attention"));
  }

private:
  Attention a;
  OpBuilder &b;
  Location loc;
  Value batchLinear;           // the block's batch entry, linear
  SmallVector<Value> batchIdx; // the same as the softmax's loops
  Value lane;                  // the thread's place in its warp
  Value q2; // 2 (lane % 4): the lane's first column in MMA fragments
  // Shared memory: a step's 16 keys of K (16 x depth) and of V (16 x
  // width), which the block's threads load together and its warps read
  // with ldmatrix.
  Value kTile, vTile;

  Value c(int64_t v) { return index(b, loc, v); }
  /// The scores' MMAs along the depth: 16 deep each, the last perhaps half
  /// past it.
  int64_t deepSteps() const { return (a.depth + 15) / 16; }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value add(Value x, int64_t v) {
    return arith::AddIOp::create(b, loc, x, c(v));
  }
  Value clamp(Value x, int64_t size) {
    return arith::MinUIOp::create(b, loc, x, c(size - 1));
  }
  Value i32(int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
  }

  /// Two 16-bit floats as one MMA register, `lo` first (PTX's order for a
  /// register pair): bf16 in an i32 (its low half), f16 as vector<2xf16>,
  /// as NVVM's mma.sync takes them.
  Value pack(Value lo, Value hi) {
    auto narrow = [&](Value x) {
      return x.getType() == a.half
                 ? x
                 : arith::TruncFOp::create(b, loc, a.half, x).getResult();
    };
    if (a.half.isF16())
      return vector::FromElementsOp::create(b, loc,
                                            VectorType::get({2}, a.half),
                                            ValueRange{narrow(lo), narrow(hi)});
    auto bits = [&](Value x) {
      Value i = arith::BitcastOp::create(b, loc, b.getI16Type(), narrow(x));
      return arith::ExtUIOp::create(b, loc, b.getI32Type(), i).getResult();
    };
    Value high = arith::ShLIOp::create(b, loc, bits(hi), i32(16));
    return arith::OrIOp::create(b, loc, high, bits(lo));
  }

  /// `op`'s loop point whose loops `at` sets (the others 0).
  SmallVector<Value> pointOf(linalg::LinalgOp op,
                             ArrayRef<std::pair<unsigned, Value>> at) {
    SmallVector<Value> point(op.getNumLoops(), c(0));
    for (auto [loop, v] : at)
      point[loop] = v;
    return point;
  }

  /// An operand of `op` at the loop point whose loops `at` sets.
  Value load(linalg::LinalgOp op, OpOperand *operand,
             ArrayRef<std::pair<unsigned, Value>> at) {
    return memref::LoadOp::create(
        b, loc, operand->get(),
        operandIndices(b, loc, op.getMatchingIndexingMap(operand),
                       pointOf(op, at)));
  }

  /// Whether `operand` of `op` holds each run of `n` elements (col, ...,
  /// col + n - 1) of `loop` side by side, aligned to n elements for a col
  /// that is a multiple of n: `loop` is its innermost index, of stride 1,
  /// and every other stride and the offset are multiples of n (the buffers
  /// themselves are 64-byte aligned, cudaMalloc's 256).
  bool contiguous(linalg::LinalgOp op, OpOperand *operand, unsigned loop,
                  int64_t n) {
    AffineMap map = op.getMatchingIndexingMap(operand);
    auto type = cast<MemRefType>(operand->get().getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (map.getNumResults() == 0 ||
        map.getResults().back() != getAffineDimExpr(loop, b.getContext()) ||
        failed(type.getStridesAndOffset(strides, offset)) ||
        strides.back() != 1 || ShapedType::isDynamic(offset) || offset % n)
      return false;
    return llvm::all_of(ArrayRef(strides).drop_back(), [&](int64_t s) {
      return !ShapedType::isDynamic(s) && s % n == 0;
    });
  }

  /// The MMA register of `operand`'s elements (col, col + 1) along `loop`,
  /// its other loops as `at` sets them: one 32-bit load where the pair lies
  /// side by side (contiguous), else two 16-bit ones.
  Value pairAt(linalg::LinalgOp op, OpOperand *operand,
               SmallVector<std::pair<unsigned, Value>> at, unsigned loop,
               Value col) {
    if (!contiguous(op, operand, loop, 2)) {
      auto at1 = at;
      at.push_back({loop, col});
      at1.push_back({loop, add(col, 1)});
      return pack(load(op, operand, at), load(op, operand, at1));
    }
    at.push_back({loop, col});
    SmallVector<Value> point = pointOf(op, at);
    Value pair = vector::LoadOp::create(
        b, loc, VectorType::get({2}, a.half), operand->get(),
        operandIndices(b, loc, op.getMatchingIndexingMap(operand), point),
        /*nontemporal=*/false, llvm::MaybeAlign(4));
    if (a.half.isF16())
      return pair; // f16 pairs are MMA registers as they are
    Value word = vector::BitCastOp::create(
        b, loc, VectorType::get({1}, b.getI32Type()), pair);
    return vector::ExtractOp::create(b, loc, word, ArrayRef<int64_t>{0});
  }

  /// A GEMM's batch loops (its output's leading dimensions, in order) at
  /// the block's batch entry: its linear index, delinearized by the GEMM's
  /// own batch sizes (the values GEMM may have merged batch and heads).
  SmallVector<std::pair<unsigned, Value>> batchLoops(linalg::LinalgOp op) {
    AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
    SmallVector<int64_t> ranges = op.getStaticLoopRanges(), sizes;
    SmallVector<unsigned> loops;
    for (AffineExpr e : out.getResults().drop_back(2)) {
      loops.push_back(cast<AffineDimExpr>(e).getPosition());
      sizes.push_back(ranges[loops.back()]);
    }
    SmallVector<std::pair<unsigned, Value>> at;
    for (auto [loop, v] :
         llvm::zip(loops, delinearize(b, loc, batchLinear, sizes)))
      at.push_back({loop, v});
    return at;
  }

  /// The input of a GEMM whose map uses `loop`.
  OpOperand *inputUsing(linalg::LinalgOp op, unsigned loop) {
    for (OpOperand *in : op.getDpsInputOperands())
      if (op.getMatchingIndexingMap(in).isFunctionOfDim(loop))
        return in;
    return nullptr;
  }

  Value mma(ValueRange aRegs, ValueRange bRegs, ValueRange acc,
            SmallVectorImpl<Value> &out) {
    Type f32 = b.getF32Type();
    auto structType =
        LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
    // bf16 pairs travel in i32s, so the PTX type is said; f16 pairs are
    // vector<2xf16>, whose type NVVM infers.
    std::optional<std::array<NVVM::MMATypes, 2>> types;
    if (a.half.isBF16())
      types = std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16,
                                            NVVM::MMATypes::bf16};
    auto op = NVVM::MmaOp::create(
        b, loc, structType, aRegs, bRegs, acc, ArrayRef<int64_t>{16, 8, 16},
        std::nullopt, std::nullopt, types,
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                       NVVM::MMALayout::col});
    out.clear();
    for (int64_t i = 0; i < 4; ++i)
      out.push_back(LLVM::ExtractValueOp::create(b, loc, op, i));
    return op;
  }

  Value shuffleXor(Value x, int64_t offset) {
    return gpu::ShuffleOp::create(b, loc, x, i32(offset), i32(32),
                                  gpu::ShuffleMode::XOR)
        .getShuffleResult();
  }

  /// Reads of some buffers answered with values the kernel holds in
  /// registers (their values at the point being computed).
  struct Known : Memory {
    DenseMap<Value, Value> values; // buffer -> its value at the point
    Value load(OpBuilder &b, Location loc, Value memref,
               ValueRange indices) const override {
      if (Value v = values.lookup(cleave::viewedBuffer(memref)))
        return v;
      return Memory::load(b, loc, memref, indices);
    }
  };

  /// The softmax's last op (the division by the sum, and whatever the
  /// export does with it before rounding) at (batch, row, some key), given
  /// the exponential there and the row's sum. The key is not read: the
  /// body reads only those two.
  Value normalize(Value e, Value l, Value row) {
    SmallVector<Value> point(batchIdx);
    point.append({row, c(0)});
    Known known;
    known.values[cleave::viewedBuffer(a.normalize.getDpsInputs()[0])] = e;
    known.values[cleave::viewedBuffer(a.normalize.getDpsInputs()[1])] = l;
    return emitBody(b, loc, a.normalize, point, nullptr, Value(), {}, known)[0];
  }

  /// The elementwise ops on the scores at (batch, row, key), given the
  /// score there.
  Value prelude(Value score, Value row, Value key) {
    SmallVector<Value> point(batchIdx);
    point.append({row, key});
    Known known;
    known.values[cleave::viewedBuffer(a.scores.getDpsInitOperand(0)->get())] =
        score;
    Value x = score;
    for (linalg::GenericOp op : a.prelude) {
      x = emitBody(b, loc, op, point, nullptr, Value(), {}, known)[0];
      known.values[cleave::viewedBuffer(op.getDpsInits()[0])] = x;
    }
    return x;
  }

  void body(Value block, Value thread, int64_t entries, int64_t tiles) {
    // The last tiles of queries first: under a causal mask they see the
    // most keys, and blocks start roughly in order, so the short ones fill
    // the last wave.
    Value tile = arith::SubIOp::create(
        b, loc, c(tiles - 1),
        arith::DivUIOp::create(b, loc, block, c(entries)));
    batchLinear = arith::RemUIOp::create(b, loc, block, c(entries));
    batchIdx = delinearize(b, loc, batchLinear, a.batch);
    Value warp = arith::DivUIOp::create(b, loc, thread, c(32));
    lane = arith::RemUIOp::create(b, loc, thread, c(32));
    Value g = arith::DivUIOp::create(b, loc, lane, c(4)); // the lane's group
    q2 = arith::MulIOp::create(
        b, loc, arith::RemUIOp::create(b, loc, lane, c(4)), c(2));
    Value rowBase = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, tile, c(kWarps * kRowsPerWarp)),
        arith::MulIOp::create(b, loc, warp, c(kRowsPerWarp)));
    // The lane's two rows (g and g + 8 of its warp's 16), and the same
    // clamped into the queries for reading.
    Value rows[2] = {arith::AddIOp::create(b, loc, rowBase, g), Value()};
    rows[1] = add(rows[0], 8);
    Value readRows[2] = {clamp(rows[0], a.queries), clamp(rows[1], a.queries)};

    linalg::LinalgOp g1 = a.scores, g2 = a.values;
    OpOperand *qIn = inputUsing(g1, a.q.m), *kIn = inputUsing(g1, a.q.n);
    OpOperand *vIn = inputUsing(g2, a.v.n);
    SmallVector<std::pair<unsigned, Value>> g1Batch = batchLoops(g1),
                                            g2Batch = batchLoops(g2);
    // Q's register of elements (col, col + 1) of the depth.
    auto qPair = [&](Value row, Value col) {
      SmallVector<std::pair<unsigned, Value>> at(g1Batch);
      at.push_back({a.q.m, row});
      return pairAt(g1, qIn, at, a.q.k, col);
    };
    // A step's K and V, rows of keys: the block loads them into shared
    // memory, after every warp is done with the last step's.
    auto loadK = [&](Value j0) {
      fillTile(kTile, g1, kIn, g1Batch, a.q.n, a.q.k, a.depth, j0, thread);
    };
    auto loadV = [&](Value j0) {
      fillTile(vTile, g2, vIn, g2Batch, a.v.k, a.v.n, a.width, j0, thread);
    };
    // Q's registers; where the depth is not a multiple of 16, the last
    // MMA's columns 8-15 are past it: zeros, as are K's tile columns there
    // (written once; the steps' loads leave them).
    SmallVector<SmallVector<Value, 4>> qRegs;
    for (int64_t kk = 0; kk < deepSteps(); ++kk) {
      SmallVector<Value, 4> regs;
      for (int64_t r = 0; r < 4; ++r) {
        int64_t group = kk * 16 + 8 * (r / 2);
        regs.push_back(group < a.depth ? qPair(readRows[r % 2], add(q2, group))
                                       : pack(f32(0), f32(0)));
      }
      qRegs.push_back(regs);
    }
    if (a.depth % 16) {
      // 16 rows of 8 zeros: one element a thread (static_assert above).
      Value row = arith::DivUIOp::create(b, loc, thread, c(kChunk));
      Value col =
          add(arith::RemUIOp::create(b, loc, thread, c(kChunk)), a.depth);
      Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(a.half));
      memref::StoreOp::create(b, loc, zero, kTile, ValueRange{row, col});
    }

    // First pass over the keys: each of the lane's two rows' maximum and
    // sum (the sum's part over the lane's keys, rescaled as the maximum
    // grows).
    double negInf = -std::numeric_limits<double>::infinity();
    int64_t outTiles = a.width / 8;
    int64_t steps = (a.keys + kKeys - 1) / kKeys;
    auto keyLoop =
        [&](Value end, ValueRange inits,
            function_ref<SmallVector<Value>(Value, ValueRange)> step) {
          return scf::ForOp::create(
              b, loc, c(0), end, c(kKeys), inits,
              [&](OpBuilder &lb, Location, Value j0, ValueRange carried) {
                OpBuilder::InsertionGuard guard(b);
                b.setInsertionPoint(lb.getInsertionBlock(),
                                    lb.getInsertionPoint());
                scf::YieldOp::create(b, loc, step(j0, carried));
              });
        };
    // It also finds where the lane's live keys end: the end of the last
    // step in which one of its exponentials is not 0. (One that is 0 stays
    // 0 against the row's final maximum, which is no smaller.)
    auto stats = keyLoop(
        c(steps * kKeys), {f32(negInf), f32(negInf), f32(0), f32(0), i32(0)},
        [&](Value j0, ValueRange carried) {
          gpu::BarrierOp::create(b, loc);
          loadK(j0);
          gpu::BarrierOp::create(b, loc);
          Scores x = scores(j0, readRows, qRegs);
          Value live = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 0);
          SmallVector<Value> next;
          for (int64_t h = 0; h < 2; ++h) {
            Value m =
                arith::MaximumFOp::create(b, loc, carried[h], rowMax(x, h));
            Value l = arith::MulFOp::create(
                b, loc, carried[2 + h],
                math::ExpOp::create(
                    b, loc,
                    arith::SubFOp::create(b, loc, carried[h], offset(m))));
            for (int64_t nt = 0; nt < 2; ++nt)
              for (int64_t i = 2 * h; i < 2 * h + 2; ++i) {
                Value e = exp(x.v[nt][i], m);
                l = arith::AddFOp::create(b, loc, l, e);
                live = arith::OrIOp::create(
                    b, loc, live,
                    arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, e,
                                          f32(0)));
              }
            next.push_back(m);
            next.push_back(l);
          }
          Value stepEnd = arith::IndexCastOp::create(b, loc, b.getI32Type(),
                                                     add(j0, kKeys));
          Value end =
              arith::SelectOp::create(b, loc, live, stepEnd, carried[4]);
          return SmallVector<Value>{next[0], next[2], next[1], next[3], end};
        });
    Value maxima[2], sums[2];
    for (int64_t h = 0; h < 2; ++h) {
      maxima[h] = stats.getResult(h);
      Value l = stats.getResult(2 + h);
      l = arith::AddFOp::create(b, loc, l, shuffleXor(l, 1));
      sums[h] = arith::AddFOp::create(b, loc, l, shuffleXor(l, 2));
    }

    // Second pass: the scores again, each probability divided by its row's
    // sum and rounded as the IR rounds it, times V; over the block's keys
    // up to the end of its last live step (keysEnd).
    Value end = keysEnd(stats.getResult(4), sums, readRows, steps);
    auto out = keyLoop(end, SmallVector<Value>(outTiles * 4, f32(0)),
                       [&](Value j0, ValueRange carried) {
                         gpu::BarrierOp::create(b, loc);
                         loadK(j0);
                         loadV(j0);
                         gpu::BarrierOp::create(b, loc);
                         Scores x = scores(j0, readRows, qRegs);
                         Value p[2][4];
                         for (int64_t nt = 0; nt < 2; ++nt)
                           for (int64_t i = 0; i < 4; ++i)
                             p[nt][i] =
                                 normalize(exp(x.v[nt][i], maxima[i / 2]),
                                           sums[i / 2], readRows[i / 2]);
                         // P (16 rows by 16 keys) as the A fragment: the
                         // scores' fragments of keys 0-7 and 8-15 side by side.
                         SmallVector<Value, 4> pRegs = {
                             pack(p[0][0], p[0][1]), pack(p[0][2], p[0][3]),
                             pack(p[1][0], p[1][1]), pack(p[1][2], p[1][3])};
                         SmallVector<Value> next;
                         SmallVector<SmallVector<Value, 2>> vRegs =
                             vFragments(outTiles);
                         for (int64_t dt = 0; dt < outTiles; ++dt) {
                           SmallVector<Value> sum;
                           mma(pRegs, vRegs[dt], carried.slice(dt * 4, 4), sum);
                           next.append(sum);
                         }
                         return next;
                       });

    for (int64_t dt = 0; dt < outTiles; ++dt)
      for (int64_t i = 0; i < 4; ++i) {
        Value value = out.getResult(dt * 4 + i);
        Value row = rows[i / 2];
        Value col = add(q2, dt * 8 + i % 2);
        Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             row, c(a.queries));
        auto guard = scf::IfOp::create(b, loc, inside, false);
        OpBuilder::InsertionGuard ig(b);
        b.setInsertionPointToStart(guard.thenBlock());
        store(value, row, col);
      }
  }

  /// Where the second pass may stop for the whole block: the largest of its
  /// lanes' ends of live keys (`laneEnd`, from the first pass). Past it
  /// every exponential of the block's rows is 0, so each probability there
  /// is the normalization of 0 by its row's sum: where that is exactly 0
  /// for each of the lane's rows, the keys past its end add nothing to the
  /// output (0 x V, V finite) and are skipped; otherwise (a row whose sum
  /// is 0, say) the lane keeps all the keys. Under a causal mask (of
  /// -infinity, or of a large negative number, whose exponentials are 0 in
  /// float32) a block of queries stops at its last query's key: about half
  /// the keys, on average, are skipped.
  Value keysEnd(Value laneEnd, Value sums[2], Value readRows[2],
                int64_t steps) {
    Value skip = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
    for (int64_t h = 0; h < 2; ++h) {
      Value p = normalize(f32(0), sums[h], readRows[h]);
      p = arith::ExtFOp::create(b, loc, b.getF32Type(), p);
      skip = arith::AndIOp::create(
          b, loc, skip,
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, p, f32(0)));
    }
    Value lane =
        arith::SelectOp::create(b, loc, skip, laneEnd, i32(steps * kKeys));
    Value block = gpu::AllReduceOp::create(
        b, loc, lane,
        gpu::AllReduceOperationAttr::get(b.getContext(),
                                         gpu::AllReduceOperation::MAXUI),
        /*uniform=*/true);
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), block);
  }

  /// The output at (batch, row, col): the values GEMM's output, or its
  /// rounding's where that reads it.
  void store(Value value, Value row, Value col) {
    linalg::LinalgOp op = a.values;
    SmallVector<std::pair<unsigned, Value>> at = batchLoops(op);
    at.append({{a.v.m, row}, {a.v.n, col}});
    OpOperand *out = op.getDpsInitOperand(0);
    SmallVector<Value> indices =
        operandIndices(b, loc, op.getMatchingIndexingMap(out), pointOf(op, at));
    if (!a.rounding) {
      memref::StoreOp::create(b, loc, value, out->get(), indices);
      return;
    }
    // The rounding reads the output at its own point, through a view with
    // the same rows (sameRows): its loops are the batch entry in its own
    // leading sizes, the row and the column.
    value = arith::TruncFOp::create(b, loc, a.half, value);
    auto read = cast<MemRefType>(a.rounding.getDpsInputs()[0].getType());
    SmallVector<Value> point =
        delinearize(b, loc, batchLinear, read.getShape().drop_back(2));
    point.append({row, col});
    OpOperand *rounded = a.rounding.getDpsInitOperand(0);
    memref::StoreOp::create(
        b, loc, value, rounded->get(),
        operandIndices(b, loc, a.rounding.getMatchingIndexingMap(rounded),
                       point));
  }

  /// A lane's scores for 16 keys from `j0`, after the elementwise ops:
  /// v[nt][i] at row g + 8 (i / 2) of the warp's, key j0 + 8 nt + 2q + i % 2
  /// (-infinity past the last key).
  struct Scores {
    Value v[2][4];
  };

  Scores scores(Value j0, Value readRows[2],
                ArrayRef<SmallVector<Value, 4>> qRegs) {
    Value negInf = f32(-std::numeric_limits<double>::infinity());
    // K's fragments (B of Q x K^T: K's rows as its columns), for each 16 of
    // the depth the four 8 x 8 matrices (keys 0-7 and 8-15, each at depth
    // 0-7 and 8-15 of the 16): one ldmatrix, each lane's registers by the
    // MMA's B layout as they are.
    SmallVector<SmallVector<Value, 4>> kRegs;
    for (int64_t kk = 0; kk < deepSteps(); ++kk)
      kRegs.push_back(ldmatrix(kTile, /*transpose=*/false, 4,
                               [&](int64_t i) -> std::pair<int64_t, int64_t> {
                                 return {8 * (i / 2), kk * 16 + 8 * (i % 2)};
                               }));
    Scores x;
    for (int64_t nt = 0; nt < 2; ++nt) {
      SmallVector<Value> acc(4, f32(0)), out;
      for (int64_t kk = 0; kk < deepSteps(); ++kk) {
        SmallVector<Value, 2> regs = {kRegs[kk][2 * nt], kRegs[kk][2 * nt + 1]};
        mma(qRegs[kk], regs, acc, out);
        acc = out;
      }
      for (int64_t i = 0; i < 4; ++i) {
        Value keyAt =
            add(arith::AddIOp::create(b, loc, j0, q2), nt * 8 + i % 2);
        Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             keyAt, c(a.keys));
        Value s = prelude(acc[i], readRows[i / 2], clamp(keyAt, a.keys));
        x.v[nt][i] = arith::SelectOp::create(b, loc, inside, s, negInf);
      }
    }
    return x;
  }

  /// V's fragments (B of P x V) for each 8 of its columns: the two 8 x 8
  /// matrices of keys 0-7 and 8-15 at those columns, transposed as they
  /// load (the MMA's B register pairs run along the keys); two column
  /// tiles an ldmatrix, the last alone when their count is odd.
  SmallVector<SmallVector<Value, 2>> vFragments(int64_t outTiles) {
    SmallVector<SmallVector<Value, 2>> regs;
    for (int64_t dt = 0; dt < outTiles; dt += 2) {
      int64_t count = std::min<int64_t>(outTiles - dt, 2) * 2;
      SmallVector<Value, 4> loaded =
          ldmatrix(vTile, /*transpose=*/true, count,
                   [&](int64_t i) -> std::pair<int64_t, int64_t> {
                     return {8 * (i % 2), 8 * (dt + i / 2)};
                   });
      for (int64_t t = 0; t < count / 2; ++t)
        regs.push_back({loaded[2 * t], loaded[2 * t + 1]});
    }
    return regs;
  }

  /// `count` 8 x 8 matrices of `tile` by one warp's nvgpu.ldmatrix, matrix
  /// i's top left corner at `corner(i)` (row, column): lane l gives the
  /// address of row l % 8 of matrix l / 8 (lanes past the matrices repeat
  /// the first ones). Each matrix's register as the MMA takes it.
  SmallVector<Value, 4>
  ldmatrix(Value tile, bool transpose, int64_t count,
           function_ref<std::pair<int64_t, int64_t>(int64_t)> corner) {
    // The lane's matrix, as a select over the (static) corners.
    Value matrix = arith::RemUIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, lane, c(8)), c(count));
    Value row = arith::RemUIOp::create(b, loc, lane, c(8));
    Value top = c(corner(0).first), left = c(corner(0).second);
    for (int64_t i = 1; i < count; ++i) {
      Value is =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, matrix, c(i));
      top = arith::SelectOp::create(b, loc, is, c(corner(i).first), top);
      left = arith::SelectOp::create(b, loc, is, c(corner(i).second), left);
    }
    Value r = arith::AddIOp::create(b, loc, top, row);
    auto type = VectorType::get({count, 2}, a.half);
    Value loaded =
        nvgpu::LdMatrixOp::create(b, loc, type, tile, ValueRange{r, left},
                                  transpose, static_cast<uint32_t>(count));
    SmallVector<Value, 4> regs;
    for (int64_t i = 0; i < count; ++i) {
      Value pair =
          vector::ExtractOp::create(b, loc, loaded, ArrayRef<int64_t>{i});
      if (a.half.isBF16()) {
        Value word = vector::BitCastOp::create(
            b, loc, VectorType::get({1}, b.getI32Type()), pair);
        pair = vector::ExtractOp::create(b, loc, word, ArrayRef<int64_t>{0});
      }
      regs.push_back(pair);
    }
    return regs;
  }

  /// The block's threads load rows j0 ... j0 + 15 of `loop` (keys; clamped
  /// into the keys) of `op`'s `operand`, each `cols` long along `colLoop`,
  /// at the block's batch entry, into `tile`: 16-byte runs, one a thread
  /// (a vector load where the operand holds them side by side, else eight
  /// 16-bit loads).
  void fillTile(Value tile, linalg::LinalgOp op, OpOperand *operand,
                ArrayRef<std::pair<unsigned, Value>> batch, unsigned loop,
                unsigned colLoop, int64_t cols, Value j0, Value thread) {
    int64_t perRow = cols / kChunk, chunks = kKeys * perRow;
    int64_t threads = kWarps * 32;
    bool vectors = contiguous(op, operand, colLoop, kChunk);
    auto chunkType = VectorType::get({kChunk}, a.half);
    for (int64_t first = 0; first < chunks; first += threads) {
      Value chunk = add(thread, first);
      std::optional<OpBuilder::InsertionGuard> guard;
      if (first + threads > chunks) { // some threads have no chunk
        Value has = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                          chunk, c(chunks));
        auto inside = scf::IfOp::create(b, loc, has, false);
        guard.emplace(b);
        b.setInsertionPointToStart(inside.thenBlock());
      }
      Value row = arith::DivUIOp::create(b, loc, chunk, c(perRow));
      Value col = arith::MulIOp::create(
          b, loc, arith::RemUIOp::create(b, loc, chunk, c(perRow)), c(kChunk));
      Value key = clamp(arith::AddIOp::create(b, loc, j0, row), a.keys);
      SmallVector<std::pair<unsigned, Value>> at(batch);
      at.push_back({loop, key});
      if (vectors) {
        at.push_back({colLoop, col});
        Value run = vector::LoadOp::create(
            b, loc, chunkType, operand->get(),
            operandIndices(b, loc, op.getMatchingIndexingMap(operand),
                           pointOf(op, at)),
            /*nontemporal=*/false, llvm::MaybeAlign(16));
        // 16-byte aligned: the tile is (cleave-align-workgroup-buffers),
        // its rows are a whole number of runs, and col is a run's start.
        vector::StoreOp::create(b, loc, run, tile, ValueRange{row, col},
                                /*nontemporal=*/false, llvm::MaybeAlign(16));
        continue;
      }
      for (int64_t e = 0; e < kChunk; ++e) {
        Value colE = add(col, e);
        auto atE = at;
        atE.push_back({colLoop, colE});
        memref::StoreOp::create(b, loc, load(op, operand, atE), tile,
                                ValueRange{row, colE});
      }
    }
  }

  /// The maximum of row half `h`'s scores over its four lanes.
  Value rowMax(const Scores &x, int64_t h) {
    Value t = x.v[0][2 * h];
    for (Value y : {x.v[0][2 * h + 1], x.v[1][2 * h], x.v[1][2 * h + 1]})
      t = arith::MaximumFOp::create(b, loc, t, y);
    t = arith::MaximumFOp::create(b, loc, t, shuffleXor(t, 1));
    return arith::MaximumFOp::create(b, loc, t, shuffleXor(t, 2));
  }

  /// What a row subtracts from its scores: its maximum, or 0 while it has
  /// no finite score (so that -infinity minus it stays -infinity).
  Value offset(Value m) {
    Value none =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, m,
                              f32(-std::numeric_limits<double>::infinity()));
    return arith::SelectOp::create(b, loc, none, f32(0), m);
  }

  /// exp(x - m), as softmax's exponential computes it.
  Value exp(Value x, Value m) {
    return math::ExpOp::create(b, loc,
                               arith::SubFOp::create(b, loc, x, offset(m)));
  }
};

struct AttentionToGpuPass
    : cleave::impl::CleaveAttentionToGpuBase<AttentionToGpuPass> {
  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> gemms;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (cleave::isGemm(op))
        gemms.push_back(op);
    });
    DenseSet<Operation *> taken;
    for (linalg::LinalgOp g1 : gemms) {
      if (taken.contains(g1))
        continue;
      std::optional<Attention> a = matchAttention(g1);
      if (!a)
        continue;
      SmallVector<Operation *> members = a->members();
      taken.insert(members.begin(), members.end());
      // The kernel stands where the last member was, so buffers freed
      // since the first (Q and K after the scores, V after its GEMM) are
      // freed after it; the members, their fills and the buffers only they
      // used go.
      for (Operation *op = a->scores->getNextNode(); op != members.back();) {
        Operation *next = op->getNextNode();
        if (isa<memref::DeallocOp>(op))
          op->moveAfter(members.back());
        op = next;
      }
      OpBuilder b(members.back());
      KernelBuilder(*a, b, a->values.getLoc()).build();
      for (Operation *op : llvm::reverse(members))
        op->erase();
      for (Operation *fill : a->fills)
        fill->erase();
      for (Value root : a->internal)
        cleave::eraseIfDead(root);
    }
  }
};

} // namespace
