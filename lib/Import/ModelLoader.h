//===- ModelLoader.h - Reading ONNX protobufs and tensor files ------------===//
//
// Everything that touches bytes on disk for the importer: the ModelProto itself
// (with a clear error for truncated or malformed files), TensorProto payloads
// (inline, typed fields or external data), and numpy `.npy` files given to
// --bind-input. Weights that become function parameters are never read here;
// only their metadata is checked.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_MODELLOADER_H
#define CLEAVE_LIB_IMPORT_MODELLOADER_H

#include "ConstTensor.h"

#include "onnx/onnx.pb.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace cleave::onnx_import {

/// Parses the binary ModelProto at `path`.
llvm::Expected<onnx::ModelProto> loadModelProto(llvm::StringRef path);

/// The MLIR element type of an ONNX TensorProto data type, or a null type for
/// types Cleave does not handle.
mlir::Type elementTypeFor(mlir::MLIRContext *ctx, int32_t onnxDataType);
/// The type a tensor of ONNX data type `onnxDataType` is held in: its
/// elementTypeFor, or for an unsigned integer type the signless integer of
/// its width (UINT8 in i8), whose bits it shares. Which values hold unsigned
/// integers the importer tracks itself (GraphValue::isUnsigned): arith ops
/// take signless integers only. Null for types Cleave does not handle.
mlir::Type storageTypeFor(mlir::MLIRContext *ctx, int32_t onnxDataType);
/// Whether `onnxDataType` is an unsigned integer type Cleave holds (UINT8,
/// UINT16, UINT4).
bool isUnsignedDataType(int32_t onnxDataType);
/// Whether `onnxDataType` is INT4 or UINT4: stored two a byte in ONNX, held
/// one a byte (i8) by Cleave (GraphValue::fourBit).
bool isFourBitDataType(int32_t onnxDataType);
/// ONNX's name of a data type, for messages ("FLOAT16", "STRING").
std::string onnxDataTypeName(int32_t onnxDataType);

/// Where an external tensor's bytes live.
struct ExternalDataRef {
  std::string path;
  uint64_t offset = 0;
  int64_t length = -1; // -1: up to the end of the file
};

/// Resolves (relative to `modelDir`) and checks the external data reference of
/// `tensor`: the file must exist and hold the tensor's bytes.
llvm::Expected<ExternalDataRef>
resolveExternalData(const onnx::TensorProto &tensor, llvm::StringRef modelDir,
                    int64_t expectedBytes);

/// Reads a TensorProto's elements (inline or external) into a ConstTensor.
llvm::Expected<ConstTensor> readTensorProto(mlir::MLIRContext *ctx,
                                            const onnx::TensorProto &tensor,
                                            llvm::StringRef modelDir);

/// Reads a tensor file: numpy `.npy`, or a serialized TensorProto (`.pb`).
llvm::Expected<ConstTensor> readTensorFile(mlir::MLIRContext *ctx,
                                           llvm::StringRef path);

/// Bytes of one element of an ONNX data type as Cleave holds it (INT4 and
/// UINT4: 1), 0 if unknown.
int64_t onnxElementBytes(int32_t onnxDataType);

/// The bytes `tensor`'s dims describe in ONNX's encoding (4-bit types two a
/// byte), or an error naming it if a dimension is negative or the size does
/// not fit 64 bits.
llvm::Expected<int64_t> tensorByteSize(const onnx::TensorProto &tensor);

/// Checks, without decoding them, that `tensor`'s elements are all there:
/// its raw bytes, typed values or external data hold what its shape needs.
llvm::Error checkTensorData(const onnx::TensorProto &tensor,
                            llvm::StringRef modelDir);

} // namespace cleave::onnx_import

#endif // CLEAVE_LIB_IMPORT_MODELLOADER_H
