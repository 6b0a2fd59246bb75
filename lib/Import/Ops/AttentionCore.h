//===- AttentionCore.h - What the attention operators share ----*- C++ -*-===//
//
// The pieces ONNX's Attention and ONNX Runtime's attention operators
// (Attention, MultiHeadAttention, GroupQueryAttention, RotaryEmbedding) are
// built from: heads split out, masks as additive biases, scaled dot-product
// attention, rotary embeddings. Internal to lib/Import/Ops.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_OPS_ATTENTIONCORE_H
#define CLEAVE_LIB_IMPORT_OPS_ATTENTIONCORE_H

#include "mlir/IR/Builders.h"

#include <optional>

namespace cleave::onnx_import {

/// A scalar -inf of the float `type`.
mlir::Value negInfConstant(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Type type);

/// [B, S, H*D] -> [B, H, S, D].
mlir::Value splitHeads(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                       int64_t heads);

/// [B, H, S, D] -> [B, S, H*D].
mlir::Value mergeHeads(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);

/// An additive bias [q, kv] (or [B, 1, q, kv] with per-batch `offsets`) that
/// is 0 where key j may be attended by query i (j <= i + offset) and -inf
/// elsewhere.
mlir::Value causalBias(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type,
                       int64_t q, int64_t kv, int64_t offset,
                       mlir::Value offsets);

/// `x` + `y` with broadcasting, for bias terms; `y` alone when `x` is null.
mlir::Value addBias(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                    mlir::Value y);

/// What attention computes: the raw scores, the scores with the bias, the
/// probabilities and the result [batch, q heads, q length, head size].
struct Scores {
  mlir::Value qk, withBias, probs, y;
};

/// Scaled dot-product attention of `q` [B, Hq, S, D] over `k` [B, Hkv, T,
/// D] and `v` [B, Hkv, T, Dv] (KV head h serving q heads h*r .. h*r+r-1),
/// the additive `bias` (null for none) broadcast onto the scores, softcap
/// before it, the softmax in `softmaxType` with fully masked (-inf) rows
/// giving zeros.
Scores attend(mlir::OpBuilder &b, mlir::Location loc, mlir::Value q,
              mlir::Value k, mlir::Value v, mlir::Value bias,
              std::optional<double> scale, double softcap,
              mlir::Type softmaxType);

/// Rotary embedding of `x` [B, H, S, D] by `cos`, `sin` [B, 1, S, R/2] on
/// its first R dimensions, the rest passed through. Halves (x1 = x[:R/2],
/// x2 = x[R/2:R]) give [x1 cos - x2 sin, x2 cos + x1 sin]; `interleaved`
/// pairs (x[2i], x[2i+1]) give (x0 cos - x1 sin, x1 cos + x0 sin).
mlir::Value rotate(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                   mlir::Value cos, mlir::Value sin, bool interleaved);

} // namespace cleave::onnx_import

#endif // CLEAVE_LIB_IMPORT_OPS_ATTENTIONCORE_H
