//===- GraphImporter.cpp - Walks an ONNX graph into func @main ------------===//
//
// Declares graph inputs and weights as function arguments, dispatches every
// node to its handler, and returns the graph outputs. Also implements
// NodeContext and the OpRegistry that handlers are looked up in.
//
//===----------------------------------------------------------------------===//

#include "cleave/Support/Attributes.h"

#include "GraphImporter.h"

#include "Builders.h"
#include "ModelLoader.h"
#include "OpArity.h"
#include "SymbolicDims.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <set>

using namespace mlir;
using namespace cleave;
using namespace cleave::onnx_import;

//===----------------------------------------------------------------------===//
// OpRegistry
//===----------------------------------------------------------------------===//

void OpRegistry::add(StringRef opType, int64_t sinceVersion, OpHandler handler,
                     UnsignedOperands unsignedOperands) {
  auto &versions = handlers[opType];
  versions.emplace_back(sinceVersion, Entry{handler, unsignedOperands});
  llvm::sort(versions, [](auto &a, auto &b) { return a.first < b.first; });
}

OpRegistry::Entry OpRegistry::lookup(StringRef opType, int64_t opset) const {
  auto it = handlers.find(opType);
  if (it == handlers.end())
    return {};
  Entry found;
  for (auto &[since, entry] : it->second)
    if (since <= opset)
      found = entry;
  return found;
}

std::vector<std::pair<std::string, int64_t>> OpRegistry::entries() const {
  std::vector<std::pair<std::string, int64_t>> result;
  for (auto &entry : handlers)
    for (auto &version : entry.second)
      result.emplace_back(entry.getKey().str(), version.first);
  llvm::sort(result);
  return result;
}

const OpRegistry &OpRegistry::get() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    registerElementwiseOps(r);
    registerShapeOps(r);
    registerScatterOps(r);
    registerMatMulOps(r);
    registerReductionOps(r);
    registerNormalizationOps(r);
    registerAttentionOps(r);
    registerContribAttentionOps(r);
    registerControlFlowOps(r);
    registerConvOps(r);
    registerQuantizationOps(r);
    return r;
  }();
  return registry;
}

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

NodeContext::NodeContext(GraphImporter &importer, const onnx::NodeProto &node,
                         StringRef displayName, int64_t opset, Location loc)
    : importer(importer), node(node), displayName(displayName.str()),
      opsetVersion(opset), location(loc) {}

OpBuilder &NodeContext::builder() { return importer.builder(); }

StringRef NodeContext::modelDir() const { return importer.modelDir(); }

bool NodeContext::hasInput(unsigned i) const {
  return i < static_cast<unsigned>(node.input_size()) && !node.input(i).empty();
}

Value NodeContext::input(unsigned i) {
  assert(hasInput(i) && "operand is not given");
  return importer.materialize(*importer.lookup(node.input(i)), location);
}

bool NodeContext::inputUnsigned(unsigned i) const {
  return hasInput(i) && importer.lookup(node.input(i))->isUnsigned;
}

bool NodeContext::inputFourBit(unsigned i) const {
  return hasInput(i) && importer.lookup(node.input(i))->fourBit;
}

void NodeContext::markFourBit(unsigned i) {
  if (hasOutput(i))
    if (GraphValue *value = importer.lookup(node.output(i)))
      value->fourBit = true;
}

RankedTensorType NodeContext::inputType(unsigned i) const {
  assert(hasInput(i) && "operand is not given");
  return importer.lookup(node.input(i))->getType();
}

void NodeContext::boundRuntimeIndices(unsigned i, int64_t size,
                                      bool negativeFromEnd) {
  if (hasInput(i) && !constantInput(i))
    importer.noteIndexBounds(node.input(i), negativeFromEnd ? -size : 0, size,
                             displayName, opType());
}

const ConstTensor *NodeContext::constantInput(unsigned i) const {
  if (!hasInput(i))
    return nullptr;
  return importer.lookup(node.input(i))->constant.get();
}

/// The most elements an operand that must be known at compile time may have
/// when it is computed on demand: 16M (128 MB of int64 index tuples, the
/// 2048 x 2048 positions of a mask).
static constexpr int64_t kEvaluateElementLimit = int64_t(1) << 24;

const ConstTensor *NodeContext::knownInput(unsigned i) {
  if (const ConstTensor *c = constantInput(i))
    return c;
  if (!hasInput(i))
    return nullptr;
  // Computed from constants and shapes but left unfolded for its size.
  return importer.evaluateConstant(node.input(i), kEvaluateElementLimit);
}

FailureOr<const ConstTensor *>
NodeContext::requireConstantInput(unsigned i, StringRef role) {
  if (!hasInput(i)) {
    (void)fail("operand '" + role + "' is required");
    return failure();
  }
  if (const ConstTensor *c = knownInput(i))
    return c;
  emitError() << "operand '" << role << "' ('" << node.input(i)
              << "') must be known at compile time; if it comes from a graph "
                 "input, bind that input with --bind-input NAME=FILE.npy";
  return failure();
}

bool NodeContext::allInputsConstant() const {
  for (unsigned i = 0, e = numInputs(); i < e; ++i)
    if (hasInput(i) && !constantInput(i))
      return false;
  return true;
}

bool NodeContext::hasAttr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return true;
  return false;
}

const onnx::AttributeProto *NodeContext::attr(StringRef name) {
  readAttrs.insert(name);
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

/// Whether `a` has the field of `type` set.
static bool hasField(const onnx::AttributeProto &a,
                     onnx::AttributeProto::AttributeType type) {
  switch (type) {
  case onnx::AttributeProto::INT:
    return a.has_i();
  case onnx::AttributeProto::FLOAT:
    return a.has_f();
  case onnx::AttributeProto::STRING:
    return a.has_s();
  case onnx::AttributeProto::INTS:
    return a.ints_size() > 0;
  case onnx::AttributeProto::FLOATS:
    return a.floats_size() > 0;
  default:
    return false;
  }
}

const onnx::AttributeProto *
NodeContext::typedAttr(StringRef name,
                       onnx::AttributeProto::AttributeType type) {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return nullptr;
  // Writers before IR version 3 may leave the type out; the field then says.
  if (a->type() == type ||
      (a->type() == onnx::AttributeProto::UNDEFINED && hasField(*a, type)))
    return a;
  if (!mistyped)
    mistyped = "attribute '" + name.str() + "' is " +
               onnx::AttributeProto::AttributeType_Name(a->type()) +
               ", the op takes " +
               onnx::AttributeProto::AttributeType_Name(type);
  return nullptr;
}

int64_t NodeContext::intAttr(StringRef name, int64_t defaultValue) {
  const onnx::AttributeProto *a = typedAttr(name, onnx::AttributeProto::INT);
  return a ? a->i() : defaultValue;
}

float NodeContext::floatAttr(StringRef name, float defaultValue) {
  const onnx::AttributeProto *a = typedAttr(name, onnx::AttributeProto::FLOAT);
  return a ? a->f() : defaultValue;
}

std::string NodeContext::stringAttr(StringRef name, StringRef defaultValue) {
  const onnx::AttributeProto *a = typedAttr(name, onnx::AttributeProto::STRING);
  return a ? a->s() : defaultValue.str();
}

SmallVector<int64_t> NodeContext::intsAttr(StringRef name) {
  const onnx::AttributeProto *a = typedAttr(name, onnx::AttributeProto::INTS);
  if (!a)
    return {};
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

SmallVector<float> NodeContext::floatsAttr(StringRef name) {
  const onnx::AttributeProto *a = typedAttr(name, onnx::AttributeProto::FLOATS);
  if (!a)
    return {};
  return SmallVector<float>(a->floats().begin(), a->floats().end());
}

void NodeContext::ignoreAttrs(ArrayRef<StringRef> names) {
  for (StringRef name : names)
    readAttrs.insert(name);
}

std::optional<std::string> NodeContext::firstUnreadAttr() const {
  for (const auto &a : node.attribute())
    if (!readAttrs.contains(a.name()))
      return a.name();
  return std::nullopt;
}

bool NodeContext::hasOutput(unsigned i) const {
  return i < static_cast<unsigned>(node.output_size()) &&
         !node.output(i).empty();
}

/// Bytes of one element of `type` (an i1 takes one).
static int64_t elementBytesOf(Type type) {
  if (type.isIntOrFloat())
    return std::max<int64_t>(1, type.getIntOrFloatBitWidth() / 8);
  return 8;
}

void NodeContext::checkResult(unsigned i, RankedTensorType type,
                              bool constant) {
  if (badResult)
    return;
  std::optional<int64_t> bytes =
      byteSizeOf(type.getShape(), elementBytesOf(type.getElementType()));
  std::string what = "result " + std::to_string(i) + " ('" + node.output(i) +
                     "') has shape " + formatShape(type.getShape());
  if (!bytes)
    badResult = what + ", " +
                (llvm::any_of(type.getShape(), [](int64_t d) { return d < 0; })
                     ? "with a negative dimension"
                     : "whose size does not fit 64 bits");
  else if (constant && *bytes > importer.constantByteLimit())
    badResult = what + ", " + std::to_string(*bytes) +
                " bytes computed at compile time, over the limit of " +
                std::to_string(importer.constantByteLimit()) +
                " (--max-constant-bytes)";
}

void NodeContext::setOutput(unsigned i, Value value, bool isUnsigned) {
  if (!hasOutput(i))
    return;
  checkResult(i, cast<RankedTensorType>(value.getType()), /*constant=*/false);
  GraphValue v;
  v.value = value;
  v.isUnsigned = isUnsigned;
  importer.define(node.output(i), std::move(v));
}

void NodeContext::setOutput(unsigned i, ConstTensor value, bool isUnsigned) {
  if (!hasOutput(i))
    return;
  // A splat costs one element, however large its shape.
  checkResult(i, value.getType(), /*constant=*/!value.isSplat());
  GraphValue v;
  v.constant = std::make_shared<const ConstTensor>(std::move(value));
  v.isUnsigned = isUnsigned;
  importer.define(node.output(i), std::move(v));
}

InFlightDiagnostic NodeContext::emitError() {
  InFlightDiagnostic diag = mlir::emitError(location);
  diag << "node '" << displayName << "' (";
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    diag << node.domain() << ".";
  diag << opType() << "-" << opsetVersion << "): ";
  return diag;
}

LogicalResult NodeContext::fail(const Twine &message) {
  return emitError() << message;
}

LogicalResult NodeContext::checkShape(ArrayRef<int64_t> shape, StringRef what) {
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return fail(what + " " + formatShape(shape) + " has a negative dimension");
  if (!byteSizeOf(shape, 8))
    return fail(what + " " + formatShape(shape) +
                " has a size that does not fit 64 bits");
  return success();
}

FailureOr<int64_t> NodeContext::normalizeAxis(int64_t axis, int64_t rank,
                                              StringRef what) {
  if (axis < -rank || axis >= rank) {
    emitError() << what << " " << axis << " is out of range for rank " << rank;
    return failure();
  }
  return axis < 0 ? axis + rank : axis;
}

bool NodeContext::shouldFold(ArrayRef<int64_t> shape) const {
  return productOf(shape) <= importer.foldLimit();
}

Value NodeContext::materialize(const ConstTensor &value) {
  return arith::ConstantOp::create(builder(), location, value.toAttr());
}

//===----------------------------------------------------------------------===//
// GraphImporter
//===----------------------------------------------------------------------===//

GraphImporter::GraphImporter(MLIRContext &context, const ImportOptions &options,
                             StringRef path)
    : context(context), importOptions(options), modelPath(path.str()),
      modelDirectory(llvm::sys::path::parent_path(path).str()),
      opBuilder(&context), currentFoldLimit(options.foldElementLimit) {
  scopes.emplace_back();
}

Value GraphImporter::addParameter(StringRef name, RankedTensorType type) {
  lateParams.push_back(name.str());
  return mainFunc.getBody().front().addArgument(
      type, FileLineColLoc::get(&context, modelPath, 0, 0));
}

GraphValue *GraphImporter::lookup(StringRef name) {
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    auto found = it->find(name);
    if (found != it->end())
      return &found->second;
  }
  return nullptr;
}

void GraphImporter::define(StringRef name, GraphValue value) {
  scopes.back()[name] = std::move(value);
}

/// Shape and Size fold from their operand's type alone.
static bool foldsFromType(const onnx::NodeProto &node) {
  return node.op_type() == "Shape" || node.op_type() == "Size";
}

bool GraphImporter::derivable(StringRef name, int64_t &budget,
                              llvm::StringMap<bool> &known) {
  if (auto it = known.find(name); it != known.end())
    return it->second;
  GraphValue *value = lookup(name);
  if (!value)
    return false;
  if (value->constant)
    return known[name] = true;
  auto producer = producers.find(name);
  if (producer == producers.end() || --budget < 0)
    return known[name] = false;
  const onnx::NodeProto &node = *producer->second.first;
  StringRef op = node.op_type();
  // A Constant left as a value is a weight (a parameter); control flow
  // imports subgraphs.
  if (!node.domain().empty() || op == "Constant" || op == "If" ||
      op == "Loop" || op == "Scan")
    return known[name] = false;
  if (foldsFromType(node))
    return known[name] = true;
  bool all = true;
  for (const std::string &input : node.input())
    all = all && (input.empty() || derivable(input, budget, known));
  return known[name] = all;
}

bool GraphImporter::evaluateInScope(StringRef name) {
  GraphValue *value = lookup(name);
  if (value->constant) {
    // A copy in the scratch scope, so that a handler materialising it
    // there leaves the model's value alone.
    if (!scopes.back().count(name))
      define(name, GraphValue{Value(), value->constant});
    return true;
  }
  auto [node, index] = producers.lookup(name);
  for (const std::string &input : node->input()) {
    if (input.empty() || scopes.back().count(input))
      continue;
    if (foldsFromType(*node) || !evaluateInScope(input))
      define(input, *lookup(input));
  }
  if (failed(importNode(*node, index)))
    return false;
  return lookup(name)->constant != nullptr;
}

const ConstTensor *GraphImporter::evaluateConstant(StringRef name,
                                                   int64_t limit) {
  GraphValue *value = lookup(name);
  if (!value)
    return nullptr;
  if (value->constant)
    return value->constant.get();
  int64_t budget = 4096;
  llvm::StringMap<bool> known;
  if (!derivable(name, budget, known))
    return nullptr;
  // The nodes again, into a scratch scope and block, folding up to `limit`;
  // their failures are not the model's.
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });
  OpBuilder::InsertionGuard guard(opBuilder);
  Block scratch;
  opBuilder.setInsertionPointToStart(&scratch);
  int64_t savedLimit = currentFoldLimit;
  currentFoldLimit = limit;
  pushScope();
  bool evaluated = evaluateInScope(name);
  std::shared_ptr<const ConstTensor> result =
      evaluated ? lookup(name)->constant : nullptr;
  popScope();
  currentFoldLimit = savedLimit;
  while (!scratch.empty()) {
    scratch.back().dropAllUses();
    scratch.back().erase();
  }
  if (!result)
    return nullptr;
  value->constant = result;
  return value->constant.get();
}

/// Ops whose result holds only values of their operand 0 (moved, repeated
/// or dropped, never changed): index bounds on the result hold for it.
static bool passesValuesOn(const onnx::NodeProto &node) {
  static const llvm::StringSet<> ops = {
      "Identity", "Reshape", "Squeeze",        "Unsqueeze",
      "Flatten",  "Expand",  "Transpose",      "Slice",
      "Tile",     "Gather",  "GatherElements", "GatherND"};
  return ops.contains(node.op_type());
}

void GraphImporter::noteIndexBounds(StringRef indices, int64_t low,
                                    int64_t high, StringRef node,
                                    StringRef op) {
  std::string name = indices.str();
  // Back through ops that pass values on; a Cast only where it keeps every
  // integer (to an integer type at least as wide).
  for (int steps = 0; steps < 64 && !runtimeInputs.contains(name); ++steps) {
    auto producer = producers.find(name);
    if (producer == producers.end())
      return;
    const onnx::NodeProto &p = *producer->second.first;
    if (p.input_size() == 0 || p.input(0).empty())
      return;
    if (p.op_type() == "Cast") {
      GraphValue *from = lookup(p.input(0)), *to = lookup(name);
      if (!from || !to)
        return;
      Type fromType = from->getType().getElementType(),
           toType = to->getType().getElementType();
      if (!fromType.isSignlessInteger() || !toType.isSignlessInteger() ||
          toType.getIntOrFloatBitWidth() < fromType.getIntOrFloatBitWidth())
        return;
    } else if (!passesValuesOn(p)) {
      return;
    }
    name = p.input(0);
  }
  if (!runtimeInputs.contains(name))
    return;
  for (const IndexBounds &b : indexBounds)
    if (b.input == name && b.low == low && b.high == high)
      return;
  indexBounds.push_back({name, node.str(), op.str(), low, high});
}

Value GraphImporter::materialize(GraphValue &value, Location loc) {
  if (!value.value)
    value.value =
        arith::ConstantOp::create(opBuilder, loc, value.constant->toAttr());
  return value.value;
}

Location GraphImporter::nodeLocation(StringRef name) {
  return NameLoc::get(StringAttr::get(&context, name),
                      FileLineColLoc::get(&context, modelPath, 0, 0));
}

LogicalResult GraphImporter::checkOptions(const onnx::GraphProto &graph) {
  llvm::StringSet<> initializers;
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());
  llvm::StringSet<> inputs;
  std::vector<std::string> inputNames;
  for (const auto &input : graph.input())
    if (!initializers.contains(input.name())) {
      inputs.insert(input.name());
      inputNames.push_back("'" + input.name() + "'");
    }
  auto check = [&](StringRef flag, StringRef name) -> LogicalResult {
    if (inputs.contains(name))
      return success();
    return mlir::emitError(UnknownLoc::get(&context))
           << flag << " names '" << name
           << "', which is not an input of the model (its inputs: "
           << llvm::join(inputNames, ", ") << ")";
  };
  for (auto &[name, shape] : importOptions.inputShapes)
    if (failed(check("--input-shape", name)))
      return failure();
  for (auto &[name, file] : importOptions.boundInputs)
    if (failed(check("--bind-input", name)))
      return failure();
  return success();
}

LogicalResult
GraphImporter::sizeNamedDims(const onnx::GraphProto &graph,
                             llvm::StringMap<int64_t> &sizes,
                             llvm::StringMap<std::string> &ambiguous) {
  Location loc = FileLineColLoc::get(&context, modelPath, 0, 0);
  llvm::StringSet<> explicitNames, modelNames;
  for (auto &[name, size] : importOptions.namedDims) {
    sizes[name] = size;
    explicitNames.insert(name);
  }
  // Each pinned dimension the model names: (input, expression, size).
  struct Pin {
    std::string input, expr;
    int64_t size;
  };
  std::vector<Pin> pins;
  for (const auto &input : graph.input()) {
    if (!input.type().has_tensor_type() ||
        !input.type().tensor_type().has_shape())
      continue;
    const auto &dims = input.type().tensor_type().shape().dim();
    for (const auto &dim : dims)
      if (dim.has_dim_param())
        for (const std::string &name : dimNames(dim.dim_param()))
          modelNames.insert(name);
    auto pinned = importOptions.inputShapes.find(input.name());
    if (pinned == importOptions.inputShapes.end() ||
        pinned->second.size() != static_cast<size_t>(dims.size()))
      continue; // a rank mismatch is reported with the input
    for (int d = 0; d < dims.size(); ++d)
      if (dims[d].has_dim_param() && !dims[d].dim_param().empty())
        pins.push_back({input.name(), dims[d].dim_param(), pinned->second[d]});
  }
  for (auto &[name, size] : importOptions.namedDims)
    if (!modelNames.contains(name)) {
      std::vector<std::string> known;
      for (const auto &entry : modelNames)
        known.push_back("'" + entry.getKey().str() + "'");
      llvm::sort(known);
      return mlir::emitError(loc)
             << "--dim names '" << name << "', which no input dimension of the "
             << "model is named"
             << (known.empty() ? std::string(" (its inputs name none)")
                               : " (names: " + llvm::join(known, ", ") + ")");
    }
  // Only a dimension named by a name alone teaches its size: exporters
  // name some by the step they traced (Optimum's attention mask is
  // 'past_sequence_length + 1', which a prompt's is not), so an expression
  // is only evaluated, never solved. --dim wins over what a pin teaches.
  llvm::StringMap<std::pair<std::string, int64_t>> learnedFrom;
  for (const Pin &pin : pins) {
    StringRef name = StringRef(pin.expr).trim();
    std::vector<std::string> names = dimNames(name);
    if (names.size() != 1 || name != names.front() ||
        explicitNames.contains(name))
      continue;
    auto [from, inserted] = learnedFrom.try_emplace(name, pin.input, pin.size);
    if (inserted)
      sizes[name] = pin.size;
    else if (from->second.second != pin.size)
      ambiguous[name] = "'" + from->second.first + "' makes it " +
                        std::to_string(from->second.second) + ", '" +
                        pin.input + "' " + std::to_string(pin.size);
  }
  return success();
}

/// The values `graph`'s quantization ops read as quantized data: the
/// integers of DequantizeLinear, zero points, integer GEMM operands.
static llvm::StringSet<> quantizedOperands(const onnx::GraphProto &graph) {
  static const llvm::StringMap<SmallVector<int>> operands = {
      {"DequantizeLinear", {0, 2}},
      {"QuantizeLinear", {2}},
      {"MatMulInteger", {0, 1, 2, 3}},
      {"QLinearMatMul", {0, 2, 3, 5, 7}},
      {"com.microsoft.MatMulNBits", {1, 3}},
      {"com.microsoft.GatherBlockQuantized", {0, 3}},
  };
  llvm::StringSet<> names;
  for (const auto &node : graph.node()) {
    bool onnx = node.domain().empty() || node.domain() == "ai.onnx";
    auto it = operands.find(onnx ? node.op_type()
                                 : node.domain() + "." + node.op_type());
    if (it == operands.end())
      continue;
    for (int i : it->second)
      if (i < node.input_size() && !node.input(i).empty())
        names.insert(node.input(i));
  }
  return names;
}

LogicalResult GraphImporter::declareInputs(
    const onnx::GraphProto &graph, SmallVectorImpl<Type> &argTypes,
    SmallVectorImpl<std::string> &argNames, SmallVectorImpl<bool> &argIsParam) {
  Location loc = FileLineColLoc::get(&context, modelPath, 0, 0);
  llvm::StringSet<> initializers;
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());

  llvm::StringMap<int64_t> namedSizes;
  llvm::StringMap<std::string> ambiguous;
  if (failed(sizeNamedDims(graph, namedSizes, ambiguous)))
    return failure();
  std::vector<std::string> unpinned;
  std::set<std::string> unsized;
  for (const auto &input : graph.input()) {
    if (initializers.contains(input.name()))
      continue; // An initializer listed as an input: a weight with a default.
    if (!input.type().has_tensor_type())
      return mlir::emitError(loc)
             << "graph input '" << input.name()
             << "' is not a tensor; only tensors are supported";
    const auto &tensorType = input.type().tensor_type();
    Type elementType = storageTypeFor(&context, tensorType.elem_type());
    if (isUnsignedDataType(tensorType.elem_type()))
      unsignedNames.insert(input.name());
    if (tensorType.elem_type() == onnx::TensorProto::UINT16)
      return mlir::emitError(loc) << "graph input '" << input.name()
                                  << "' is UINT16, which the runtime cannot "
                                     "read (.npy's <u2 is its bfloat16)";
    if (isFourBitDataType(tensorType.elem_type()))
      return mlir::emitError(loc)
             << "graph input '" << input.name() << "' is "
             << onnxDataTypeName(tensorType.elem_type())
             << ", which the runtime cannot read (.npy has no 4-bit type)";
    if (!elementType)
      return mlir::emitError(loc)
             << "graph input '" << input.name() << "' has unsupported type "
             << onnxDataTypeName(tensorType.elem_type());

    SmallVector<int64_t> declared;
    SmallVector<std::string> symbolic;
    bool hasShape = tensorType.has_shape();
    if (hasShape) {
      for (const auto &dim : tensorType.shape().dim()) {
        if (dim.has_dim_value() && dim.dim_value() >= 0) {
          declared.push_back(dim.dim_value());
          symbolic.push_back("");
        } else {
          declared.push_back(ShapedType::kDynamic);
          symbolic.push_back(dim.has_dim_param() ? dim.dim_param() : "?");
        }
      }
    }

    auto bound = importOptions.boundInputs.find(input.name());
    if (bound != importOptions.boundInputs.end()) {
      auto tensor = readTensorFile(&context, bound->second);
      if (!tensor)
        return mlir::emitError(loc) << "--bind-input " << input.name() << ": "
                                    << llvm::toString(tensor.takeError());
      if (tensor->getElementType() != elementType)
        return mlir::emitError(loc)
               << "--bind-input " << input.name() << ": '" << bound->second
               << "' holds " << tensor->getElementType() << ", the input is "
               << elementType;
      bool matches = !hasShape || declared.size() == tensor->getShape().size();
      for (size_t d = 0; matches && hasShape && d < declared.size(); ++d)
        matches = declared[d] == ShapedType::kDynamic ||
                  declared[d] == tensor->getShape()[d];
      if (!matches)
        return mlir::emitError(loc)
               << "--bind-input " << input.name() << ": '" << bound->second
               << "' has shape " << formatShape(tensor->getShape())
               << ", which does not fit the input's declared shape";
      auto pin = importOptions.inputShapes.find(input.name());
      if (pin != importOptions.inputShapes.end() &&
          ArrayRef<int64_t>(pin->second) != tensor->getShape())
        return mlir::emitError(loc)
               << "--bind-input " << input.name() << ": '" << bound->second
               << "' has shape " << formatShape(tensor->getShape())
               << ", but --input-shape pins it to " << formatShape(pin->second);
      GraphValue value;
      value.constant = std::make_shared<const ConstTensor>(std::move(*tensor));
      value.isUnsigned = unsignedNames.contains(input.name());
      define(input.name(), std::move(value));
      continue;
    }

    auto pinned = importOptions.inputShapes.find(input.name());
    SmallVector<int64_t> shape;
    if (pinned != importOptions.inputShapes.end()) {
      shape = pinned->second;
      if (hasShape && shape.size() != declared.size())
        return mlir::emitError(loc)
               << "--input-shape " << input.name() << "=" << formatShape(shape)
               << " has rank " << shape.size() << ", the input has rank "
               << declared.size();
      for (size_t d = 0; hasShape && d < declared.size(); ++d)
        if (declared[d] != ShapedType::kDynamic && declared[d] != shape[d])
          return mlir::emitError(loc)
                 << "--input-shape " << input.name() << "="
                 << formatShape(shape) << " sets dimension " << d << " to "
                 << shape[d] << ", the model fixes it to " << declared[d];
    } else if (!hasShape) {
      unpinned.push_back("'" + input.name() + "' (rank unknown)");
      continue;
    } else {
      shape = declared;
      std::vector<std::string> open;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] != ShapedType::kDynamic)
          continue;
        // A named dimension whose names all have one size.
        std::vector<std::string> names = dimNames(symbolic[d]);
        for (const std::string &name : names)
          if (ambiguous.count(name))
            return mlir::emitError(loc)
                   << "input '" << input.name() << "' has a dimension named '"
                   << symbolic[d]
                   << "', and the --input-shape pins disagree on '" << name
                   << "' (" << ambiguous.lookup(name) << "); pin it with --dim "
                   << name << "=N or pin '" << input.name()
                   << "' with --input-shape";
        if (std::optional<int64_t> size = evaluateDim(symbolic[d], namedSizes);
            size && *size >= 0) {
          shape[d] = *size;
          continue;
        }
        for (const std::string &name : names)
          if (!namedSizes.count(name))
            unsized.insert(name);
        open.push_back("dim " + std::to_string(d) + " '" + symbolic[d] + "'");
      }
      if (!open.empty()) {
        unpinned.push_back("'" + input.name() + "' (" + llvm::join(open, ", ") +
                           ")");
        continue;
      }
    }
    if (!byteSizeOf(shape, elementBytesOf(elementType)))
      return mlir::emitError(loc)
             << "input '" << input.name() << "' has shape "
             << formatShape(shape) << ", whose size does not fit 64 bits";
    argTypes.push_back(RankedTensorType::get(shape, elementType));
    argNames.push_back(input.name());
    argIsParam.push_back(false);
    runtimeInputs.insert(input.name());
  }
  if (!unpinned.empty()) {
    auto diag = mlir::emitError(loc)
                << "graph inputs with unpinned dimensions: "
                << llvm::join(unpinned, "; ")
                << "; pin them with --input-shape NAME=DxD";
    if (!unsized.empty())
      diag << " or size their names with --dim NAME=N (unsized: "
           << llvm::join(unsized, ", ") << ")";
    return diag;
  }

  llvm::StringSet<> quantizedData = quantizedOperands(graph);
  for (const auto &init : graph.initializer()) {
    Type elementType = storageTypeFor(&context, init.data_type());
    if (isUnsignedDataType(init.data_type()))
      unsignedNames.insert(init.name());
    if (isFourBitDataType(init.data_type()))
      fourBitNames.insert(init.name());
    if (!elementType)
      return mlir::emitError(loc)
             << "initializer '" << init.name() << "' has unsupported type "
             << onnxDataTypeName(init.data_type());
    SmallVector<int64_t> shape(init.dims().begin(), init.dims().end());
    if (auto size = tensorByteSize(init); !size)
      return mlir::emitError(loc) << llvm::toString(size.takeError());
    int64_t elements = productOf(shape);
    // Shape values and scalars are inlined so shape chains fold; any float
    // tensor with more than one element is a weight, however small (a norm's
    // scale, a rotary frequency table), and stays a parameter; so is
    // quantized data (per-channel zero points, an int32 bias), which is
    // split with its weight.
    bool inlined =
        elements <= 1 ||
        (!isa<FloatType>(elementType) && !quantizedData.contains(init.name()) &&
         elements <= importOptions.inlineElementLimit);
    if (inlined) {
      auto tensor = readTensorProto(&context, init, modelDirectory);
      if (!tensor)
        return mlir::emitError(loc) << llvm::toString(tensor.takeError());
      GraphValue value;
      value.constant = std::make_shared<const ConstTensor>(std::move(*tensor));
      value.isUnsigned = unsignedNames.contains(init.name());
      value.fourBit = fourBitNames.contains(init.name());
      define(init.name(), std::move(value));
      continue;
    }
    // A weight: check that its bytes exist, without reading them.
    if (llvm::Error error = checkTensorData(init, modelDirectory))
      return mlir::emitError(loc) << llvm::toString(std::move(error));
    argTypes.push_back(RankedTensorType::get(shape, elementType));
    argNames.push_back(init.name());
    argIsParam.push_back(true);
  }
  if (graph.sparse_initializer_size() > 0)
    return mlir::emitError(loc) << "sparse initializer '"
                                << graph.sparse_initializer(0).values().name()
                                << "' is not supported";
  return success();
}

/// Copies the sharding specs and pipeline stages of every node's
/// device_configurations and the mesh recorded in the metadata.
static void collectShardingSpecs(const onnx::ModelProto &model,
                                 ImportExtras &extras) {
  for (const auto &prop : model.metadata_props())
    if (prop.key() == kMeshMetadataKey)
      extras.mesh = prop.value();
  for (const onnx::NodeProto &node : model.graph().node())
    for (const auto &config : node.device_configurations()) {
      if (config.has_pipeline_stage())
        extras.pipelineStages.push_back({node.name(), config.pipeline_stage()});
      for (const auto &spec : config.sharding_spec()) {
        OnnxShardingSpec out;
        out.nodeName = node.name();
        out.tensorName = spec.tensor_name();
        out.devices.assign(spec.device().begin(), spec.device().end());
        for (const auto &group : spec.index_to_device_group_map())
          out.deviceGroups[group.key()].assign(group.value().begin(),
                                               group.value().end());
        for (const auto &dim : spec.sharded_dim()) {
          int64_t shards = 1;
          for (const auto &simple : dim.simple_sharding())
            shards *= simple.num_shards();
          out.shardedDims.push_back({dim.axis(), shards});
        }
        extras.shardingSpecs.push_back(std::move(out));
      }
    }
}

LogicalResult GraphImporter::checkTaps(const onnx::GraphProto &graph) {
  std::vector<std::string> named(importOptions.tapNodes.begin(),
                                 importOptions.tapNodes.end());
  if (!importOptions.faultNode.empty())
    named.push_back(importOptions.faultNode);
  for (const std::string &tap : named) {
    bool found = false;
    for (auto [index, node] : llvm::enumerate(graph.node()))
      found |= node.name().empty()
                   ? tap == node.op_type() + "#" + std::to_string(index)
                   : tap == node.name();
    if (!found)
      return mlir::emitError(nodeLocation(tap))
             << "node '" << tap
             << "' (--tap, --plant-fault): the main graph has no node of that "
                "name";
  }
  return success();
}

/// The newest opset of the default domain Cleave knows: that of the ONNX
/// release whose schemas OpArity.inc was written from (1.23). A newer opset
/// may have changed an op the handlers know by name.
static constexpr int64_t kNewestOpset = 28;

OwningOpRef<ModuleOp> GraphImporter::importModel(const onnx::ModelProto &model,
                                                 ImportExtras *extras) {
  Location fileLoc = FileLineColLoc::get(&context, modelPath, 0, 0);
  for (const auto &opset : model.opset_import()) {
    std::string domain = opset.domain() == "ai.onnx" ? "" : opset.domain();
    opsets[domain] = opset.version();
  }
  if (!opsets.count("")) {
    if (model.ir_version() < 3)
      opsets[""] = 1;
    else {
      mlir::emitError(fileLoc) << "the model imports no opset of the default "
                                  "ONNX domain";
      return nullptr;
    }
  }
  int64_t opset = opsets.lookup("");
  if (opset < 1 || opset > kNewestOpset) {
    mlir::emitError(fileLoc)
        << "the model imports opset " << opset
        << " of the default ONNX domain; Cleave knows opsets 1 to "
        << kNewestOpset;
    return nullptr;
  }
  if (model.ir_version() > 14)
    mlir::emitWarning(fileLoc) << "IR version " << model.ir_version()
                               << " is newer than the newest Cleave knows (14)";

  const onnx::GraphProto &graph = model.graph();
  if (graph.output_size() == 0) {
    mlir::emitError(fileLoc) << "the model's graph has no outputs";
    return nullptr;
  }
  if (failed(checkOptions(graph)))
    return nullptr;

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  module->getOperation()->setAttr(
      kOnnxOpsetAttrName, opBuilder.getI64IntegerAttr(opsets.lookup("")));
  opBuilder.setInsertionPointToEnd(module->getBody());

  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  SmallVector<bool> argIsParam;
  if (failed(declareInputs(graph, argTypes, argNames, argIsParam)))
    return nullptr;

  auto func = func::FuncOp::create(opBuilder, fileLoc, "main",
                                   opBuilder.getFunctionType(argTypes, {}));
  mainFunc = func;
  Block *entry = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    func.setArgAttr(i, argIsParam[i] ? kParamAttrName : kInputAttrName,
                    opBuilder.getStringAttr(name));
    if (!argIsParam[i] && importOptions.splitIO.count(name))
      func.setArgAttr(i, kSplitIOAttrName, opBuilder.getUnitAttr());
    GraphValue value;
    value.value = entry->getArgument(i);
    value.isUnsigned = unsignedNames.contains(name);
    value.fourBit = fourBitNames.contains(name);
    define(name, std::move(value));
  }
  opBuilder.setInsertionPointToStart(entry);

  if (failed(importNodes(graph.node())))
    return nullptr;

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const auto &output : graph.output()) {
    GraphValue *value = lookup(output.name());
    if (!value) {
      mlir::emitError(fileLoc) << "graph output '" << output.name()
                               << "' is not produced by any node";
      return nullptr;
    }
    RankedTensorType type = value->getType();
    if (output.type().has_tensor_type()) {
      const auto &declared = output.type().tensor_type();
      Type declaredElement = storageTypeFor(&context, declared.elem_type());
      if (declared.elem_type() != 0 &&
          (declaredElement != type.getElementType() ||
           isUnsignedDataType(declared.elem_type()) != value->isUnsigned)) {
        mlir::emitError(fileLoc)
            << "graph output '" << output.name() << "' is computed as " << type
            << " but the model declares element type "
            << onnxDataTypeName(declared.elem_type());
        return nullptr;
      }
      if (declared.has_shape()) {
        bool matches = declared.shape().dim_size() == type.getRank();
        for (int d = 0; matches && d < declared.shape().dim_size(); ++d) {
          const auto &dim = declared.shape().dim(d);
          matches =
              !dim.has_dim_value() || dim.dim_value() == type.getDimSize(d);
        }
        if (!matches) {
          mlir::emitError(fileLoc)
              << "graph output '" << output.name()
              << "' is computed with shape " << formatShape(type.getShape())
              << ", which does not fit the shape the model declares";
          return nullptr;
        }
      }
    }
    if (value->fourBit) {
      mlir::emitError(fileLoc)
          << "graph output '" << output.name()
          << "' holds 4-bit integers, which the runtime cannot write (.npy "
             "has no 4-bit type); dequantize it or cast it to INT8 in the "
             "model";
      return nullptr;
    }
    if (value->isUnsigned && type.getElementType().isInteger(16)) {
      mlir::emitError(fileLoc)
          << "graph output '" << output.name()
          << "' is UINT16, which the runtime cannot write (.npy's <u2 is its "
             "bfloat16); cast it to INT32 in the model";
      return nullptr;
    }
    Value result = materialize(*value, fileLoc);
    auto kept = importOptions.lastPositions.find(output.name());
    if (kept != importOptions.lastPositions.end()) {
      auto [dim, count] = kept->second;
      if (dim < 0 || dim >= type.getRank() || type.getDimSize(dim) < count) {
        mlir::emitError(fileLoc)
            << "graph output '" << output.name() << "' of shape "
            << formatShape(type.getShape()) << " has no " << count
            << " last positions along dimension " << dim;
        return nullptr;
      }
      SmallVector<OpFoldResult> offsets(type.getRank(),
                                        opBuilder.getIndexAttr(0));
      SmallVector<OpFoldResult> strides(type.getRank(),
                                        opBuilder.getIndexAttr(1));
      SmallVector<OpFoldResult> sizes;
      for (int64_t size : type.getShape())
        sizes.push_back(opBuilder.getIndexAttr(size));
      offsets[dim] = opBuilder.getIndexAttr(type.getDimSize(dim) - count);
      sizes[dim] = opBuilder.getIndexAttr(count);
      result = tensor::ExtractSliceOp::create(opBuilder, fileLoc, result,
                                              offsets, sizes, strides);
      type = cast<RankedTensorType>(result.getType());
    }
    results.push_back(result);
    resultTypes.push_back(type);
    if (value->isUnsigned)
      unsignedNames.insert(output.name());
  }
  SmallVector<std::string> resultNames;
  for (const auto &output : graph.output())
    resultNames.push_back(output.name());
  if (failed(checkTaps(graph)))
    return nullptr;
  for (const std::string &name : tapped) {
    if (llvm::is_contained(resultNames, name))
      continue;
    // A copy of its own: a value both returned and read on must not be
    // written in place into the output's buffer.
    GraphValue *value = lookup(name);
    RankedTensorType type = value->getType();
    // UINT16 has no .npy type the runtime writes (see the outputs above).
    if (value->isUnsigned && type.getElementType().isInteger(16))
      continue;
    results.push_back(elementwise(
        opBuilder, fileLoc, materialize(*value, fileLoc), type.getShape(),
        type.getElementType(),
        [](OpBuilder &, Location, ValueRange args) { return args[0]; }));
    resultTypes.push_back(type);
    resultNames.push_back("tap:" + name);
    if (value->isUnsigned)
      unsignedNames.insert(resultNames.back());
  }
  func::ReturnOp::create(opBuilder, fileLoc, results);
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i = 0; i < argTypes.size(); ++i)
    argAttrs.push_back(func.getArgAttrDict(i));
  for (const std::string &name : lateParams) {
    argAttrs.push_back(opBuilder.getDictionaryAttr(
        opBuilder.getNamedAttr(kParamAttrName, opBuilder.getStringAttr(name))));
    argIsParam.push_back(true);
  }
  func.setFunctionType(
      opBuilder.getFunctionType(entry->getArgumentTypes(), resultTypes));
  func.setAllArgAttrs(argAttrs);
  for (auto [i, name] : llvm::enumerate(resultNames)) {
    func.setResultAttr(i, kOutputAttrName, opBuilder.getStringAttr(name));
    if (importOptions.splitIO.count(name))
      func.setResultAttr(i, kSplitIOAttrName, opBuilder.getUnitAttr());
  }

  // Ops nothing reads are erased (a Reshape imported through a transpose
  // leaves the transpose it replaced), so that neither the sharding preset
  // nor propagation sees them; so are the tensor names they computed.
  llvm::DenseSet<Value> erased;
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*entry)))
    if (isOpTriviallyDead(&op)) {
      erased.insert(op.result_begin(), op.result_end());
      op.erase();
    }

  // Weights nothing reads are dropped, so they are neither sharded nor stored.
  llvm::BitVector unused(func.getNumArguments());
  for (BlockArgument arg : entry->getArguments())
    if (argIsParam[arg.getArgNumber()] && arg.use_empty())
      unused.set(arg.getArgNumber());
  if (extras) {
    for (const auto &entry : scopes.front()) {
      Value value = entry.getValue().value;
      if (!value || erased.contains(value))
        continue;
      auto arg = dyn_cast<BlockArgument>(value);
      if (!(arg && unused.test(arg.getArgNumber())))
        extras->values[entry.getKey()] = value;
    }
    collectShardingSpecs(model, *extras);
  }
  if (failed(func.eraseArguments(unused)))
    return nullptr;
  // The graph's inputs and outputs that hold unsigned integers, for the
  // bundle's manifest (their tensors are signless from here on).
  SmallVector<Attribute> unsignedIO;
  for (BlockArgument arg : entry->getArguments())
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      kInputAttrName);
        name && unsignedNames.contains(name.getValue()))
      unsignedIO.push_back(name);
  for (const std::string &name : resultNames)
    if (unsignedNames.contains(name))
      unsignedIO.push_back(opBuilder.getStringAttr(name));
  if (!unsignedIO.empty())
    module->getOperation()->setAttr(kUnsignedIOAttrName,
                                    opBuilder.getArrayAttr(unsignedIO));
  if (!indexBounds.empty()) {
    SmallVector<Attribute> list;
    for (const IndexBounds &b : indexBounds)
      list.push_back(opBuilder.getDictionaryAttr({
          opBuilder.getNamedAttr("input", opBuilder.getStringAttr(b.input)),
          opBuilder.getNamedAttr("low", opBuilder.getI64IntegerAttr(b.low)),
          opBuilder.getNamedAttr("high", opBuilder.getI64IntegerAttr(b.high)),
          opBuilder.getNamedAttr("node", opBuilder.getStringAttr(b.node)),
          opBuilder.getNamedAttr("op", opBuilder.getStringAttr(b.op)),
      }));
    module->getOperation()->setAttr(kIndexBoundsAttrName,
                                    opBuilder.getArrayAttr(list));
  }

  if (failed(mlir::verify(*module)))
    return nullptr;
  return module;
}

LogicalResult GraphImporter::importNodes(
    const google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes) {
  for (int i = 0; i < nodes.size(); ++i) {
    for (const std::string &output : nodes[i].output())
      producers[output] = {&nodes[i], static_cast<unsigned>(i)};
    if (failed(importNode(nodes[i], i)))
      return failure();
  }
  return success();
}

LogicalResult GraphImporter::importNode(const onnx::NodeProto &node,
                                        unsigned index) {
  std::string name = node.name().empty()
                         ? node.op_type() + "#" + std::to_string(index)
                         : node.name();
  Location loc = nodeLocation(name);
  std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  // The op as messages name it: DOMAIN.OP outside ONNX's own domain.
  std::string opName =
      domain.empty() ? node.op_type() : domain + "." + node.op_type();
  if (!domain.empty() && !opsets.count(domain))
    return mlir::emitError(loc)
           << "node '" << name << "' uses domain '" << domain
           << "', which the model does not import";
  int64_t opset = opsets.lookup(domain);
  // An error about this node: "node 'NAME' (DOMAIN.OP-OPSET): ...".
  auto nodeError = [&]() {
    return mlir::emitError(loc)
           << "node '" << name << "' (" << opName << "-" << opset << "): ";
  };
  OpRegistry::Entry entry = OpRegistry::get().lookup(opName, opset);
  OpHandler handler = entry.handler;
  if (!handler) {
    return mlir::emitError(loc)
           << "unsupported ONNX op '" << opName << "' (opset " << opset
           << ") at node '" << name << "'";
  }
  if (failed(checkArity(node, name, opset, loc)))
    return failure();
  // ONNX values are defined once: a second definition would silently replace
  // the first for every later reader.
  for (int i = 0; i < node.output_size(); ++i) {
    const std::string &output = node.output(i);
    bool repeated = llvm::any_of(node.output(), [&](const std::string &o) {
      return &o < &node.output(i) && o == output;
    });
    if (!output.empty() && (scopes.back().count(output) || repeated))
      return nodeError()
             << "result '" << output
             << "' is already defined (by a graph input, an initializer or "
                "another node's result)";
  }
  for (const std::string &input : node.input())
    if (!input.empty() && !lookup(input))
      return nodeError() << "operand '" << input
                         << "' is not defined before its use";

  // Unsigned integers are held in signless ones: only a handler that knows
  // is given them.
  // So are 4-bit ones, one a byte.
  bool anyUnsigned = false, anyFourBit = false;
  for (const std::string &input : node.input()) {
    if (input.empty())
      continue;
    const GraphValue *value = lookup(input);
    if (!value->isUnsigned && !value->fourBit)
      continue;
    anyUnsigned |= value->isUnsigned;
    anyFourBit |= value->fourBit;
    if (entry.unsignedOperands == UnsignedOperands::Refuse)
      return nodeError() << "operand '" << input << "' holds "
                         << (value->fourBit ? "4-bit" : "unsigned")
                         << " integers, which Cleave reads only in "
                            "quantization ops, Cast and ops that move "
                            "elements";
  }

  NodeContext ctx(*this, node, name, opset, loc);
  if (failed(handler(ctx)))
    return failure();
  if (entry.unsignedOperands == UnsignedOperands::Move)
    for (const std::string &output : node.output())
      if (GraphValue *value = output.empty() ? nullptr : lookup(output)) {
        value->isUnsigned |= anyUnsigned;
        value->fourBit |= anyFourBit;
      }
  // After the handler, which read a default in its place: nothing it built
  // is kept.
  if (const std::optional<std::string> &bad = ctx.badResultShape())
    return nodeError() << *bad;
  if (std::optional<std::string> wrong = ctx.mistypedAttr())
    return nodeError() << *wrong;
  if (std::optional<std::string> unread = ctx.firstUnreadAttr())
    return mlir::emitError(loc)
           << "unsupported attribute '" << *unread << "' of ONNX op '" << opName
           << "' (opset " << opset << ") at node '" << name << "'";
  for (int i = 0; i < node.output_size(); ++i)
    if (!node.output(i).empty() && !lookup(node.output(i)))
      return nodeError() << "result " << i << " ('" << node.output(i)
                         << "') is not supported";
  // The main graph's own nodes (not a scratch evaluation or a subgraph).
  if (scopes.size() == 1) {
    if (name == importOptions.faultNode)
      plantFault(node.output(0), loc);
    bool tapAll = importOptions.tapAll;
    if (tapAll || importOptions.tapNodes.count(name))
      for (const std::string &output : node.output())
        if (!output.empty() && !(tapAll && lookup(output)->constant))
          tapped.push_back(output);
  }
  return success();
}

void GraphImporter::plantFault(StringRef name, Location loc) {
  GraphValue *value = lookup(name);
  RankedTensorType type = value->getType();
  if (!isa<FloatType>(type.getElementType()))
    return;
  Value wrong = elementwise(
      opBuilder, loc, materialize(*value, loc), type.getShape(),
      type.getElementType(), [&](OpBuilder &b, Location l, ValueRange args) {
        Type t = type.getElementType();
        Value square = mulS(b, l, args[0], args[0]);
        Value fault = mulS(b, l, scalarConstant(b, l, t, 0.25),
                           addS(b, l, scalarConstant(b, l, t, 1.0), square));
        return addS(b, l, args[0], fault);
      });
  scopes.back()[name] = GraphValue{wrong, nullptr};
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> cleave::importOnnxModel(MLIRContext &context,
                                              StringRef path,
                                              const ImportOptions &options,
                                              ImportExtras *extras) {
  context.loadDialect<arith::ArithDialect, func::FuncDialect,
                      linalg::LinalgDialect, math::MathDialect,
                      tensor::TensorDialect>();
  auto model = loadModelProto(path);
  if (!model) {
    mlir::emitError(FileLineColLoc::get(&context, path, 0, 0))
        << llvm::toString(model.takeError());
    return nullptr;
  }
  GraphImporter importer(context, options, path);
  return importer.importModel(*model, extras);
}

std::vector<std::pair<std::string, int64_t>> cleave::supportedOnnxOps() {
  return OpRegistry::get().entries();
}
