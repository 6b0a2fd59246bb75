//===- MatMul.cpp - ONNX MatMul, Gemm and Einsum --------------------------===//
//
// MatMul follows numpy (1-D promotion, batch broadcast) onto linalg.matmul for
// [..., M, K] x [K, N], and otherwise onto a batched GEMM: a linalg.generic
// that keeps several batch dimensions apart (attention's batch and heads, so
// that sharding can split either), or linalg.batch_matmul. Gemm adds transposes
// and the alpha/beta epilogue. Einsum becomes one linalg.generic whose loops
// are the equation's letters: output letters parallel, the others reductions.
// A MatMul of two constants (a rotary table's frequencies by constant
// positions) is computed here.
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../ImportContext.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <map>

using namespace mlir;
using namespace cleave::onnx_import;

namespace {

/// numpy's matmul of two constants of `shape` (the result's), products
/// summed in double (in int64 for integers) and rounded once.
ConstTensor foldMatMul(const ConstTensor &a, const ConstTensor &b,
                       ArrayRef<int64_t> shape) {
  // 1-D operands promoted: [K] as [1, K] on the left, [K, 1] on the right.
  SmallVector<int64_t> sa(a.getShape()), sb(b.getShape());
  if (sa.size() == 1)
    sa.insert(sa.begin(), 1);
  if (sb.size() == 1)
    sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  ArrayRef<int64_t> batchA = ArrayRef<int64_t>(sa).drop_back(2);
  ArrayRef<int64_t> batchB = ArrayRef<int64_t>(sb).drop_back(2);
  SmallVector<int64_t> batch = *broadcastShapes(
      {SmallVector<int64_t>(batchA), SmallVector<int64_t>(batchB)});
  // The flat offset of batch position `at` in an operand of batch `sizes`,
  // broadcast where a size is 1.
  auto offset = [&](ArrayRef<int64_t> at, ArrayRef<int64_t> sizes,
                    int64_t matrix) {
    int64_t flat = 0, lead = at.size() - sizes.size();
    for (auto [d, size] : llvm::enumerate(sizes))
      flat = flat * size + (size == 1 ? 0 : at[lead + d]);
    return flat * matrix;
  };
  bool isInt = !a.isFloat();
  std::vector<double> floats;
  std::vector<int64_t> ints;
  forEachIndex(batch, [&](ArrayRef<int64_t> at) {
    int64_t oa = offset(at, batchA, m * k), ob = offset(at, batchB, k * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        int64_t isum = 0;
        for (int64_t l = 0; l < k; ++l) {
          int64_t x = oa + i * k + l, y = ob + l * n + j;
          if (isInt)
            isum += a.getInt(x) * b.getInt(y);
          else
            sum += a.getDouble(x) * b.getDouble(y);
        }
        if (isInt)
          ints.push_back(wrapToIntType(isum, a.getElementType()));
        else
          floats.push_back(sum);
      }
  });
  return isInt ? ConstTensor::ints(a.getElementType(), shape, std::move(ints))
               : ConstTensor::floats(a.getElementType(), shape,
                                     std::move(floats));
}

LogicalResult lowerMatMul(NodeContext &ctx) {
  if (ctx.inputElementType(0) != ctx.inputElementType(1))
    return ctx.fail("operands have different element types");
  ArrayRef<int64_t> a = ctx.inputShape(0), b = ctx.inputShape(1);
  if (a.empty() || b.empty())
    return ctx.fail("operands must have rank 1 or more");
  int64_t k = a.back();
  int64_t kb = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (k != kb)
    return ctx.emitError() << "contraction sizes differ: " << k << " and "
                           << kb;
  SmallVector<int64_t> batchA(a.begin(),
                              a.size() > 2 ? a.end() - 2 : a.begin());
  SmallVector<int64_t> batchB(b.begin(),
                              b.size() > 2 ? b.end() - 2 : b.begin());
  if (!broadcastShapes({batchA, batchB}))
    return ctx.fail("batch dimensions cannot be broadcast together");
  const ConstTensor *ca = ctx.constantInput(0), *cb = ctx.constantInput(1);
  if (ca && cb) {
    // numpy's result: the batches broadcast, then M and N where the
    // operands have them (a 1-D operand's promoted dimension dropped).
    SmallVector<int64_t> shape = *broadcastShapes({batchA, batchB});
    if (a.size() > 1)
      shape.push_back(a[a.size() - 2]);
    if (b.size() > 1)
      shape.push_back(b.back());
    if (ctx.shouldFold(shape)) {
      ctx.setOutput(0, foldMatMul(*ca, *cb, shape));
      return success();
    }
  }
  ctx.setOutput(0,
                matmul(ctx.builder(), ctx.loc(), ctx.input(0), ctx.input(1)));
  return success();
}

LogicalResult lowerGemm(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  float alpha = ctx.floatAttr("alpha", 1.0f),
        beta = ctx.floatAttr("beta", 1.0f);
  bool transA = ctx.intAttr("transA", 0) != 0,
       transB = ctx.intAttr("transB", 0) != 0;
  if (ctx.inputType(0).getRank() != 2 || ctx.inputType(1).getRank() != 2)
    return ctx.fail("A and B must be matrices");
  Value a = ctx.input(0), bm = ctx.input(1);
  if (transA)
    a = transpose(b, loc, a, {1, 0});
  if (transB)
    bm = transpose(b, loc, bm, {1, 0});
  int64_t k = tensorTypeOf(a).getDimSize(1),
          kb = tensorTypeOf(bm).getDimSize(0);
  if (k != kb)
    return ctx.emitError() << "contraction sizes differ: " << k << " and "
                           << kb;
  Type type = ctx.inputElementType(0);
  Value y = matmul(b, loc, a, bm);
  SmallVector<int64_t> shape(tensorTypeOf(y).getShape());
  SmallVector<Value> operands{y};
  bool withC = ctx.hasInput(2) && beta != 0.0f;
  if (withC) {
    SmallVector<int64_t> c(ctx.inputShape(2));
    auto joint = broadcastShapes({SmallVector<int64_t>(shape), c});
    if (!joint || *joint != shape)
      return ctx.fail("C cannot be broadcast to the shape of A x B");
    operands.push_back(ctx.input(2));
  }
  if (alpha == 1.0f && !withC) {
    ctx.setOutput(0, y);
    return success();
  }
  ctx.setOutput(
      0,
      elementwise(b, loc, operands, shape, type,
                  [&](OpBuilder &nb, Location nl, ValueRange args) {
                    Value r = args[0];
                    if (alpha != 1.0f)
                      r = mulS(nb, nl, r, scalarConstant(nb, nl, type, alpha));
                    if (withC) {
                      Value c = args[1];
                      if (beta != 1.0f)
                        c = mulS(nb, nl, c, scalarConstant(nb, nl, type, beta));
                      r = addS(nb, nl, r, c);
                    }
                    return r;
                  }));
  return success();
}

/// One operand's subscripts with '...' expanded into placeholder letters.
FailureOr<std::string> expandEllipsis(NodeContext &ctx, StringRef term,
                                      int64_t rank, StringRef ellipsisLetters) {
  size_t at = term.find("...");
  if (at == StringRef::npos) {
    if (static_cast<int64_t>(term.size()) != rank) {
      ctx.emitError() << "subscripts '" << term << "' do not match rank "
                      << rank;
      return failure();
    }
    return term.str();
  }
  int64_t named = term.size() - 3;
  int64_t hidden = rank - named;
  if (hidden < 0 || hidden > static_cast<int64_t>(ellipsisLetters.size())) {
    ctx.emitError() << "subscripts '" << term << "' do not match rank " << rank;
    return failure();
  }
  return (term.take_front(at) + ellipsisLetters.take_back(hidden) +
          term.drop_front(at + 3))
      .str();
}

LogicalResult lowerEinsum(NodeContext &ctx) {
  std::string equation = ctx.stringAttr("equation", "");
  equation.erase(std::remove(equation.begin(), equation.end(), ' '),
                 equation.end());
  StringRef eq(equation);
  auto [lhs, rhs] = eq.split("->");
  bool explicitOutput = eq.contains("->");
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != ctx.numInputs())
    return ctx.emitError() << "equation '" << equation << "' names "
                           << terms.size() << " operands, the node has "
                           << ctx.numInputs();
  Type type = ctx.inputElementType(0);
  // Upper-case placeholders stand for ellipsis dims; ONNX subscripts are
  // lower-case letters in practice, so they cannot collide.
  int64_t maxHidden = 0;
  for (auto [i, term] : llvm::enumerate(terms))
    if (term.contains("..."))
      maxHidden = std::max<int64_t>(maxHidden, ctx.inputType(i).getRank() -
                                                   (term.size() - 3));
  std::string ellipsisLetters;
  for (int64_t i = 0; i < maxHidden; ++i)
    ellipsisLetters.push_back('A' + i);

  SmallVector<std::string> subscripts;
  std::map<char, int64_t> sizes;
  std::map<char, int> count;
  SmallVector<Value> operands;
  OpBuilder &b = ctx.builder();
  for (auto [i, term] : llvm::enumerate(terms)) {
    auto expanded =
        expandEllipsis(ctx, term, ctx.inputType(i).getRank(), ellipsisLetters);
    if (failed(expanded))
      return failure();
    if (ctx.inputElementType(i) != type)
      return ctx.fail("operands have different element types");
    std::string s = *expanded;
    ArrayRef<int64_t> shape = ctx.inputShape(i);
    for (size_t d = 0; d < s.size(); ++d) {
      if (s.find(s[d]) != d)
        return ctx.emitError() << "repeated subscript '" << s[d]
                               << "' within one operand (a diagonal) is not "
                                  "supported";
      ++count[s[d]];
      auto [it, inserted] = sizes.emplace(s[d], shape[d]);
      if (!inserted && it->second != shape[d]) {
        if (it->second == 1 && std::isupper(s[d]))
          it->second = shape[d];
        else if (!(shape[d] == 1 && std::isupper(s[d])))
          return ctx.emitError() << "subscript '" << s[d] << "' has sizes "
                                 << it->second << " and " << shape[d];
      }
    }
    subscripts.push_back(s);
    operands.push_back(ctx.input(i));
  }
  std::string out;
  if (explicitOutput) {
    auto expanded = expandEllipsis(
        ctx, rhs, rhs.contains("...") ? rhs.size() - 3 + maxHidden : rhs.size(),
        ellipsisLetters);
    if (failed(expanded))
      return failure();
    out = *expanded;
  } else {
    out = ellipsisLetters;
    for (auto &[letter, n] : count)
      if (n == 1 && std::islower(letter))
        out.push_back(letter);
  }
  // Broadcast size-1 ellipsis dims up front so every operand agrees.
  for (auto [i, s] : llvm::enumerate(subscripts)) {
    SmallVector<int64_t> full;
    for (char c : s)
      full.push_back(sizes[c]);
    operands[i] = broadcastTo(b, ctx.loc(), operands[i], full);
  }

  std::string loops = out;
  for (auto &[letter, n] : sizes)
    if (out.find(letter) == std::string::npos)
      loops.push_back(letter);
  auto dimOf = [&](char c) { return b.getAffineDimExpr(loops.find(c)); };
  SmallVector<AffineMap> maps;
  for (const std::string &s : subscripts) {
    SmallVector<AffineExpr> exprs;
    for (char c : s)
      exprs.push_back(dimOf(c));
    maps.push_back(AffineMap::get(loops.size(), 0, exprs, b.getContext()));
  }
  SmallVector<AffineExpr> outExprs;
  SmallVector<int64_t> outShape;
  for (char c : out) {
    if (!sizes.count(c))
      return ctx.emitError()
             << "output subscript '" << c << "' appears in no operand";
    outExprs.push_back(dimOf(c));
    outShape.push_back(sizes[c]);
  }
  maps.push_back(AffineMap::get(loops.size(), 0, outExprs, b.getContext()));
  SmallVector<utils::IteratorType> iterators;
  for (size_t d = 0; d < loops.size(); ++d)
    iterators.push_back(d < out.size() ? utils::IteratorType::parallel
                                       : utils::IteratorType::reduction);
  // Without a summed subscript (an outer product, like rotary embedding's
  // positions times frequencies) each output is one product: no zero fill
  // to add it to, so that it is plain elementwise work that fuses.
  bool sums = loops.size() > out.size();
  Value init =
      sums ? filledTensor(b, ctx.loc(), outShape, type, 0.0)
           : tensor::EmptyOp::create(b, ctx.loc(), outShape, type).getResult();
  auto generic = linalg::GenericOp::create(
      b, ctx.loc(), TypeRange{init.getType()}, operands, ValueRange{init}, maps,
      iterators, [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value product = args[0];
        for (Value v : args.drop_front().drop_back())
          product = mulS(nb, nl, product, v);
        linalg::YieldOp::create(
            nb, nl, sums ? addS(nb, nl, args.back(), product) : product);
      });
  ctx.setOutput(0, generic.getResult(0));
  return success();
}

} // namespace

void cleave::onnx_import::registerMatMulOps(OpRegistry &r) {
  r.add("MatMul", 1, lowerMatMul);
  r.add("Gemm", 7, lowerGemm);
  r.add("Einsum", 12, lowerEinsum);
}
