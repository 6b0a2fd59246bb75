//===- AttentionMatcher.h - Attention the kernel can compute ----*- C++ -*-===//
//
// The matcher half of cleave-attention-to-gpu: which ops, from a scores
// GEMM on, form one attention that AttentionToGpu.cpp's kernel builder can
// compute in one launch, with the sizes and buffers the kernel needs.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_CODEGEN_CUDA_ATTENTIONMATCHER_H
#define CLEAVE_LIB_CODEGEN_CUDA_ATTENTIONMATCHER_H

#include "cleave/Support/Gemms.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace cleave::attention {

using llvm::SmallVector;
using mlir::FloatType;
using mlir::Operation;
using mlir::Value;
namespace linalg = mlir::linalg;

/// The kernel's shape, which bounds what the matcher accepts.
constexpr int64_t kWarps = 4;        // a block's warps
constexpr int64_t kRowsPerWarp = 16; // an MMA's M
constexpr int64_t kKeys = 16;        // keys a step (an MMA's K for P x V)
constexpr int64_t kChunk = 8;        // 16-bit elements a 16-byte access moves
// Shared tiles' rows are padded by one chunk: the 8 rows an ldmatrix reads
// at once then start on 8 different 16-byte bank groups.
constexpr int64_t kPad = kChunk;
// K's padding past a depth that is not a multiple of 16 (16 rows of a
// chunk) is zeroed one element a thread.
static_assert(kKeys * kChunk == kWarps * 32);

/// One attention, matched.
struct Attention {
  linalg::LinalgOp scores, values;        // the two GEMMs
  cleave::GemmLoops q, v;                 // their loops
  SmallVector<linalg::GenericOp> prelude; // elementwise ops on the scores
  linalg::GenericOp max, exp, sum, normalize;
  linalg::GenericOp rounding; // an elementwise rounding of the output, or null
  SmallVector<int64_t> batch; // the rows' leading loops (batch, heads)
  int64_t queries = 0, keys = 0, depth = 0, width = 0;
  SmallVector<Value> internal; // buffers only the attention touches
  SmallVector<Operation *> fills;
  FloatType half;

  SmallVector<Operation *> members() const {
    SmallVector<Operation *> all = {scores};
    for (linalg::GenericOp op : prelude)
      all.push_back(op);
    all.append({max, exp, sum, normalize, values});
    if (rounding)
      all.push_back(rounding);
    return all;
  }
};

/// The attention whose scores GEMM is `scores` (Q by K transposed, 16-bit
/// operands, float32 result), if the ops after it are one the kernel can
/// compute; none otherwise.
std::optional<Attention> matchAttention(linalg::LinalgOp scores);

} // namespace cleave::attention

#endif // CLEAVE_LIB_CODEGEN_CUDA_ATTENTIONMATCHER_H
