//===- OpArity.cpp - Operand and result counts from the ONNX schemas ------===//
//
// Handlers index a node's operands by position. A node written with fewer
// operands than its op takes, an empty name where an operand is required, or
// no results at all would send a handler past the end of the node's lists;
// the importer checks every node against the ONNX schema of its opset first.
//
//===----------------------------------------------------------------------===//

#include "OpArity.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/ArrayRef.h"

#include <algorithm>
#include <climits>

using namespace mlir;

namespace {
struct Arity {
  const char *op;
  int64_t since;
  int minInputs, maxInputs, minOutputs, maxOutputs;
  uint64_t requiredInputs;
};

// Sorted by op name, then by since version.
constexpr Arity kArities[] = {
#include "OpArity.inc"
};
} // namespace

/// The schema in force at `opset`: the newest version not after it.
static const Arity *lookupArity(llvm::StringRef op, int64_t opset) {
  const Arity *found = nullptr;
  for (const Arity &a : kArities)
    if (op == a.op && a.since <= opset)
      found = &a;
  return found;
}

static std::string range(int lo, int hi) {
  if (lo == hi)
    return std::to_string(lo);
  if (hi == INT_MAX)
    return std::to_string(lo) + " or more";
  return std::to_string(lo) + " to " + std::to_string(hi);
}

LogicalResult cleave::onnx_import::checkArity(const onnx::NodeProto &node,
                                              llvm::StringRef name,
                                              int64_t opset, Location loc) {
  // The table holds ONNX's own schemas; another domain's op of the same
  // name (com.microsoft.Attention) checks its operands in its handler.
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return success();
  const Arity *arity = lookupArity(node.op_type(), opset);
  if (!arity)
    return success();
  auto fail = [&]() {
    return mlir::emitError(loc) << "node '" << name << "' (" << node.op_type()
                                << "-" << opset << "): ";
  };
  int inputs = node.input_size(), outputs = node.output_size();
  if (inputs < arity->minInputs || inputs > arity->maxInputs)
    return fail() << "has " << inputs << " operand" << (inputs == 1 ? "" : "s")
                  << "; " << node.op_type() << " takes "
                  << range(arity->minInputs, arity->maxInputs);
  if (outputs < arity->minOutputs || outputs > arity->maxOutputs)
    return fail() << "has " << outputs << " result" << (outputs == 1 ? "" : "s")
                  << "; " << node.op_type() << " gives "
                  << range(arity->minOutputs, arity->maxOutputs);
  for (int i = 0; i < inputs; ++i)
    if ((arity->requiredInputs >> std::min(i, 63) & 1) && node.input(i).empty())
      return fail() << "operand " << i << " is required but its name is empty";
  return success();
}
