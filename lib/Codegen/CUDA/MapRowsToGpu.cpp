//===- MapRowsToGpu.cpp - Row-wise chains as one GPU kernel ---------------===//
//
// See Passes.td. Finds chains of generics over the same rows that contain a
// row reduction (layer norm, RMS norm, softmax) and makes each one gpu.launch
// of a block per row, the members a barrier apart.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/CUDA/Passes.h"

#include "cleave/Codegen/BufferViews.h"
#include "cleave/Codegen/GpuKernelBuilder.h"
#include "cleave/Codegen/RowChains.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SmallBitVector.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEMAPROWSTOGPU
#include "cleave/Codegen/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave::gpu_kernel;
using namespace cleave::row_chains;

namespace {

/// A buffer the chain writes, kept in shared memory for the block's row: the
/// members read and write the row there, and global memory sees it only
/// where it must.
struct CachedRow : RowBuffer {
  bool load = false;  // see needsLoad: load the row first
  bool store = false; // read after the chain: store the row at the end
};

struct MapRowsToGpuPass
    : cleave::impl::CleaveMapRowsToGpuBase<MapRowsToGpuPass> {
  using Base::Base;

  void runOnOperation() override {
    for (Chain &chain : findChains(getOperation()))
      lower(chain);
  }

  /// The buffers the chain writes that fit, together, in `sharedMemory`
  /// bytes (rowBuffers, in order); a buffer written elsewhere goes straight
  /// to global memory.
  SmallVector<CachedRow> rowsToCache(const Chain &chain) {
    SmallVector<CachedRow> cached;
    int64_t bytes = 0;
    for (const RowBuffer &buffer : rowBuffers(chain)) {
      if (bytes + buffer.rowBytes() > sharedMemory)
        continue;
      bytes += buffer.rowBytes();
      CachedRow row{buffer};
      row.store = liveAfter(buffer.root, chain.members.back());
      row.load = needsLoad(chain, buffer.root, row.store);
      cached.push_back(row);
    }
    return cached;
  }

  /// Copies each cached row that `pick` selects between global and shared
  /// memory (`toShared`: global to shared), the block's threads striding.
  void copyRows(OpBuilder &b, Location loc, ArrayRef<CachedRow> cached,
                ArrayRef<Value> shared, ArrayRef<Value> row, Value thread,
                int64_t t, bool toShared,
                function_ref<bool(const CachedRow &)> pick) {
    for (auto [c, buffer] : llvm::zip(cached, shared)) {
      if (!pick(c))
        continue;
      scf::ForOp::create(
          b, loc, thread, index(b, loc, c.slice), index(b, loc, t),
          ValueRange{}, [&](OpBuilder &lb, Location loc, Value i, ValueRange) {
            SmallVector<Value> at(row.begin(), row.end());
            llvm::append_range(
                at, delinearize(lb, loc, i,
                                c.type.getShape().drop_front(row.size())));
            if (toShared)
              memref::StoreOp::create(
                  lb, loc, memref::LoadOp::create(lb, loc, c.root, at), buffer,
                  ValueRange{i});
            else
              memref::StoreOp::create(
                  lb, loc,
                  memref::LoadOp::create(lb, loc, buffer, ValueRange{i}),
                  c.root, at);
            scf::YieldOp::create(lb, loc);
          });
    }
  }

  /// One launch at the last member, a block per row; deallocations between
  /// the members move after it.
  void lower(Chain &chain) {
    linalg::GenericOp last = chain.members.back();
    Location loc = last.getLoc();
    size_t r = chain.rows.size();
    int64_t rowCount = 1, widest = 1;
    for (int64_t s : chain.rows)
      rowCount *= s;
    for (linalg::GenericOp op : chain.members) {
      // The ranges are a temporary: a range-for over a view of it would
      // read freed memory (C++17 keeps only the view alive).
      SmallVector<int64_t> ranges = op.getStaticLoopRanges();
      int64_t points = 1;
      for (int64_t s : ArrayRef(ranges).drop_front(r))
        points *= s;
      widest = std::max(widest, points);
    }
    SmallVector<CachedRow> cached = rowsToCache(chain);
    SmallVector<Type> sharedTypes;
    auto workgroup =
        gpu::AddressSpaceAttr::get(&getContext(), gpu::AddressSpace::Workgroup);
    for (const CachedRow &c : cached) {
      sharedTypes.push_back(MemRefType::get({c.slice}, c.type.getElementType(),
                                            MemRefLayoutAttrInterface(),
                                            workgroup));
      widest = std::max(widest, c.slice);
    }
    int64_t t = std::min<int64_t>(threads, (widest + 31) / 32 * 32);

    OpBuilder b(last);
    auto build = [&](OpBuilder &ib, Value block, Value thread) {
      auto kernel = cast<gpu::LaunchOp>(ib.getBlock()->getParentOp());
      SmallVector<Value> shared(kernel.getWorkgroupAttributions());
      RowMemory memory;
      memory.rank = r;
      for (auto [c, buffer] : llvm::zip(cached, shared))
        memory.rows[c.root] = buffer;
      SmallVector<Value> row = delinearize(ib, loc, block, chain.rows);
      auto loaded = [](const CachedRow &c) { return c.load; };
      auto stored = [](const CachedRow &c) { return c.store; };
      copyRows(ib, loc, cached, shared, row, thread, t, /*toShared=*/true,
               loaded);
      bool prologue = llvm::any_of(cached, loaded);
      for (auto [k, op] : llvm::enumerate(chain.members)) {
        if (k > 0 || prologue)
          gpu::BarrierOp::create(ib, loc);
        emitMember(ib, loc, op, row, thread, t, memory);
      }
      if (llvm::any_of(cached, stored)) {
        gpu::BarrierOp::create(ib, loc);
        copyRows(ib, loc, cached, shared, row, thread, t, /*toShared=*/false,
                 stored);
      }
    };
    gpu::LaunchOp kernel = launch(b, loc, rowCount, t, build, sharedTypes);
    replaceMembers(chain, kernel);
  }

  /// One member inside the row's block: its threads stride over the row's
  /// points (an elementwise member) or reduce them (a reduction).
  void emitMember(OpBuilder &b, Location loc, linalg::GenericOp op,
                  ArrayRef<Value> row, Value thread, int64_t t,
                  const Memory &memory) {
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    SmallVector<int64_t> inner(ranges.begin() + row.size(), ranges.end());
    int64_t points = 1;
    for (int64_t s : inner)
      points *= s;
    auto pointAt = [&](OpBuilder &lb, Value linear) {
      SmallVector<Value> point(row.begin(), row.end());
      llvm::append_range(point, delinearize(lb, loc, linear, inner));
      return point;
    };
    if (op.getNumParallelLoops() == op.getNumLoops()) {
      scf::ForOp::create(b, loc, thread, index(b, loc, points),
                         index(b, loc, t), ValueRange{},
                         [&](OpBuilder &lb, Location loc, Value i, ValueRange) {
                           SmallVector<Value> point = pointAt(lb, i);
                           storeOutputs(lb, loc, op, point,
                                        emitBody(lb, loc, op, point, nullptr,
                                                 Value(), {}, memory),
                                        memory);
                           scf::YieldOp::create(lb, loc);
                         });
      return;
    }
    // A reduction (fitsRows found its combiner), whose other parallel loops
    // have one point: the row's reduced points are its points, in order.
    Combiner c = *findCombiner(op);
    Value total =
        reduceAcrossBlock(b, loc, op, c, thread, t, points, pointAt, memory);
    SmallVector<Value> start(row.begin(), row.end());
    start.append(inner.size(), index(b, loc, 0));
    storeCombined(b, loc, op, c, thread, start, total, memory);
  }
};

} // namespace
