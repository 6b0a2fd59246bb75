//===- SymbolicDims.cpp - Named dimensions of graph inputs ----------------===//
//
// A recursive-descent evaluator of dimension expressions: sums of products
// of names and integers.
//
//===----------------------------------------------------------------------===//

#include "SymbolicDims.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace cleave::onnx_import;
using llvm::StringRef;

namespace {

/// Reads one expression; names are looked up in `sizes`, and each name read
/// is reported to `seen`.
class DimParser {
public:
  DimParser(StringRef text, const llvm::StringMap<int64_t> &sizes,
            std::vector<std::string> *seen)
      : rest(text), sizes(sizes), seen(seen) {}

  /// The value, or nothing on a name without a size or on bad syntax (a bad
  /// factor is nothing, and nothing propagates through every operator).
  std::optional<int64_t> parse() {
    std::optional<int64_t> value = sum();
    skipSpace();
    if (!rest.empty())
      return std::nullopt;
    return value;
  }

private:
  void skipSpace() { rest = rest.ltrim(); }

  bool consume(char c) {
    skipSpace();
    if (!rest.starts_with(StringRef(&c, 1)))
      return false;
    rest = rest.drop_front();
    return true;
  }

  std::optional<int64_t> sum() {
    std::optional<int64_t> value = product();
    while (true) {
      if (consume('+')) {
        std::optional<int64_t> term = product();
        value = value && term ? std::optional<int64_t>(*value + *term)
                              : std::nullopt;
      } else if (consume('-')) {
        std::optional<int64_t> term = product();
        value = value && term ? std::optional<int64_t>(*value - *term)
                              : std::nullopt;
      } else {
        return value;
      }
    }
  }

  std::optional<int64_t> product() {
    std::optional<int64_t> value = factor();
    while (consume('*')) {
      std::optional<int64_t> next = factor();
      value =
          value && next ? std::optional<int64_t>(*value * *next) : std::nullopt;
    }
    return value;
  }

  std::optional<int64_t> factor() {
    skipSpace();
    size_t length = 0;
    if (!rest.empty() && llvm::isDigit(rest.front())) {
      while (length < rest.size() && llvm::isDigit(rest[length]))
        ++length;
      int64_t number;
      bool tooLarge = rest.take_front(length).getAsInteger(10, number);
      rest = rest.drop_front(length);
      return tooLarge ? std::nullopt : std::optional<int64_t>(number);
    }
    while (length < rest.size() && (llvm::isAlnum(rest[length]) ||
                                    rest[length] == '_' || rest[length] == '.'))
      ++length;
    if (length == 0) {
      rest = StringRef(); // bad syntax: nothing more is read
      return std::nullopt;
    }
    std::string name = rest.take_front(length).str();
    rest = rest.drop_front(length);
    if (seen && !llvm::is_contained(*seen, name))
      seen->push_back(name);
    auto it = sizes.find(name);
    return it == sizes.end() ? std::nullopt
                             : std::optional<int64_t>(it->second);
  }

  StringRef rest;
  const llvm::StringMap<int64_t> &sizes;
  std::vector<std::string> *seen;
};

} // namespace

std::optional<int64_t>
cleave::onnx_import::evaluateDim(StringRef expr,
                                 const llvm::StringMap<int64_t> &sizes) {
  return DimParser(expr, sizes, nullptr).parse();
}

std::vector<std::string> cleave::onnx_import::dimNames(StringRef expr) {
  std::vector<std::string> names;
  llvm::StringMap<int64_t> none;
  DimParser(expr, none, &names).parse();
  return names;
}
