//===- Mesh.cpp - Named device meshes -------------------------------------===//

#include "cleave/Sharding/Mesh.h"

#include "llvm/ADT/StringExtras.h"

using namespace cleave;

static llvm::Error meshError(llvm::StringRef text, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "--mesh '" + text + "': " + why);
}

llvm::Expected<MeshSpec> cleave::parseMesh(llvm::StringRef text) {
  MeshSpec mesh;
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',');
  for (llvm::StringRef part : parts) {
    auto [name, size] = part.trim().split('=');
    name = name.trim();
    int64_t value = 0;
    if (name.empty() || size.trim().getAsInteger(10, value))
      return meshError(text,
                       "expected NAME=SIZE[,NAME=SIZE]..., got '" + part + "'");
    if (!llvm::all_of(name,
                      [](char c) { return llvm::isAlnum(c) || c == '_'; }) ||
        llvm::isDigit(name.front()))
      return meshError(text, "axis name '" + name + "' is not an identifier");
    if (value <= 0)
      return meshError(text, "axis '" + name + "' must have a positive size");
    if (mesh.axisIndex(name))
      return meshError(text, "axis '" + name + "' is given twice");
    // Checked before multiplying: sizes whose product overflows int64 once
    // gave a bundle for 0 ranks.
    if (value > kMaxRanks / mesh.rankCount())
      return meshError(text, "the mesh has more than " +
                                 llvm::Twine(kMaxRanks) + " ranks");
    mesh.axisNames.push_back(name.str());
    mesh.axisSizes.push_back(value);
  }
  return mesh;
}

int64_t MeshSpec::rankCount() const {
  int64_t n = 1;
  for (int64_t s : axisSizes)
    n *= s;
  return n;
}

std::optional<unsigned> MeshSpec::axisIndex(llvm::StringRef name) const {
  for (auto [i, axis] : llvm::enumerate(axisNames))
    if (axis == name)
      return i;
  return std::nullopt;
}

llvm::SmallVector<int64_t> MeshSpec::coordinates(int64_t rank) const {
  llvm::SmallVector<int64_t> coords(axisSizes.size());
  for (int i = static_cast<int>(axisSizes.size()) - 1; i >= 0; --i) {
    coords[i] = rank % axisSizes[i];
    rank /= axisSizes[i];
  }
  return coords;
}

int64_t MeshSpec::groupSize(llvm::ArrayRef<int16_t> axes) const {
  int64_t n = 1;
  for (int16_t a : axes)
    n *= axisSizes[a];
  return n;
}

int64_t MeshSpec::indexInGroup(int64_t rank,
                               llvm::ArrayRef<int16_t> axes) const {
  llvm::SmallVector<int64_t> coords = coordinates(rank);
  int64_t index = 0;
  for (int16_t a : axes)
    index = index * axisSizes[a] + coords[a];
  return index;
}

std::string MeshSpec::str() const {
  std::string s;
  for (auto [i, name] : llvm::enumerate(axisNames))
    s += (i ? "," : "") + name + "=" + std::to_string(axisSizes[i]);
  return s;
}
