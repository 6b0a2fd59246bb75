/*===- Abi.h - The boundary between emitted code and the runtime ----------===*
 *
 * Every symbol that code emitted by cleave-compile and the runtime exchange is
 * named here; the compiler includes this header for the names, the runtime for
 * the declarations, so the two cannot drift.
 *
 * The compiled model provides:
 *   cleave_model_desc  a NUL-terminated text describing the model's buffers,
 *                      one line each, in the order cleave_model_run takes them:
 *                        cleave-model <abi-version>
 *                        weights <ranks> (<file-bytes> <checksum as 16 hex
 *                                digits>) for each rank
 *                        writer <rank>
 *                        input  <name> <dtype> <rank> <dims...>
 *                        param  <name> <dtype> <rank> <dims...> <bytes>
 *                               <offset in each rank's file, -1: not held>
 *                        output <name> <dtype> <rank> <dims...>
 *                      names are percent-encoded (space, '%', newline, tab);
 *                      dtypes: f32 f16 bf16 f64 i64 i32 i16 i8 bool.
 *                        mesh <rank-count> <axis-count> <sizes...>
 *                        group <axis-count> <axes...>
 *                        pipeline <axis> <stages> <microbatches>
 *                                 <predicted seconds per run, per stage>
 *                        bounds <input> <low> <high> <node>
 *                      every value of integer input <input> must lie in
 *                      [low, high): it indexes a tensor at node <node>
 *                      (token ids below the vocabulary); the runtime checks
 *                      before a run (names percent-encoded);
 *                      `mesh` is present for multi-rank programs; each
 *                      `group` line declares a communicator over those mesh
 *                      axes (its id is its position among the group lines),
 *                      created once at start-up. Param lines describe this
 *                      rank's slice; each rank maps weights/rank<r>.bin,
 *                      which holds only what its pipeline stage reads.
 *                      `writer` names the rank that writes the outputs
 *                      (the last stage's first rank). `pipeline` is present
 *                      when the program has stages or microbatches.
 *   cleave_model_run   runs the model once on `buffers`: one pointer per line
 *                      above (inputs, params, outputs), row-major, each
 *                      aligned to 64 bytes.
 *
 * A generation bundle (cleave-compile --generate) also provides a second
 * program, for the prompt, over the same weights and communicator groups:
 *   cleave_prefill_desc, cleave_prefill_run  as the two above;
 *   cleave_generate_desc  how the loop drives the two programs, one line
 *                      each:
 *                        generate <max-seq> <max-batch> <prompt-length>
 *                                 <vocabulary> <end|count|position>
 *                        role <ids|mask|positions|cache_position|logits>
 *                             <name>
 *                        cache <past input> <present output> <batch dim>
 *                              <sequence dim> [<stage>...]
 *                      each program takes the past keys or values in the
 *                      `cache` input; with `end`, it returns only its new
 *                      tokens' in the output (the decode program: one, at
 *                      the end of its mask; the prefill: the prompt's,
 *                      after one masked past position); with `count`
 *                      (GroupQueryAttention), the whole present, the new
 *                      rows after the mask's count of tokens (the prefill
 *                      has no past, its prompts start their rows) and no
 *                      positions role; with `position` (a static cache),
 *                      the whole cache in and out, the step's rows written
 *                      at cache_position, one for the whole batch; the stages listed are the
 *                      decode program's that read the past (none: every
 *                      stage), and only their ranks keep that cache.
 *
 * The runtime provides the functions emitted code calls (prefix cleave_rt_).
 *
 *===----------------------------------------------------------------------===*/

#ifndef CLEAVE_RUNTIME_ABI_H
#define CLEAVE_RUNTIME_ABI_H

#include <stdint.h>

#define CLEAVE_ABI_VERSION 3

/* Symbols of the compiled model. */
#define CLEAVE_ABI_MODEL_DESC "cleave_model_desc"
#define CLEAVE_ABI_MODEL_RUN "cleave_model_run"
#define CLEAVE_ABI_PREFILL_DESC "cleave_prefill_desc"
#define CLEAVE_ABI_PREFILL_RUN "cleave_prefill_run"
#define CLEAVE_ABI_GENERATE_DESC "cleave_generate_desc"
#define CLEAVE_GEN_GENERATE "generate"
#define CLEAVE_GEN_ROLE "role"
#define CLEAVE_GEN_CACHE "cache"

/* The first word of each line of cleave_model_desc (see above): the bundle
 * writes them, the runtime's descriptor parser reads them. */
#define CLEAVE_DESC_HEADER "cleave-model"
#define CLEAVE_DESC_WEIGHTS "weights"
#define CLEAVE_DESC_WRITER "writer"
#define CLEAVE_DESC_INPUT "input"
#define CLEAVE_DESC_PARAM "param"
#define CLEAVE_DESC_OUTPUT "output"
#define CLEAVE_DESC_MESH "mesh"
#define CLEAVE_DESC_GROUP "group"
#define CLEAVE_DESC_PIPELINE "pipeline"
#define CLEAVE_DESC_BOUNDS "bounds"

/* Symbols of the runtime called from compiled code. */
#define CLEAVE_ABI_SGEMM "cleave_rt_sgemm"
/* GEMMs on 16-bit operands with a float32 result (--precision): this name,
 * then the operands' dtype (bf16, f16). */
#define CLEAVE_ABI_GEMM "cleave_rt_gemm_"
/* The same with a 16-bit result, rounded: the name above, then this. */
#define CLEAVE_ABI_GEMM_ROUNDED "_rounded"
/* Integer GEMMs (MatMulInteger, QLinearMatMul): this name, then B's element
 * type (i8 or i16). */
#define CLEAVE_ABI_IGEMM "cleave_rt_igemm_"
/* Only in libcleave_rt_cuda. */
#define CLEAVE_ABI_CUDA_FREE "cleave_rt_cuda_free"
#define CLEAVE_ABI_CUDA_SYNCHRONIZE "cleave_rt_cuda_synchronize"
/* Collectives take a suffix naming the element type (see below). */
#define CLEAVE_ABI_ALL_REDUCE "cleave_rt_all_reduce_"
#define CLEAVE_ABI_ALL_GATHER "cleave_rt_all_gather_"
#define CLEAVE_ABI_REDUCE_SCATTER "cleave_rt_reduce_scatter_"
#define CLEAVE_ABI_ALL_TO_ALL "cleave_rt_all_to_all_"
#define CLEAVE_ABI_SEND "cleave_rt_send_"
#define CLEAVE_ABI_RECV "cleave_rt_recv_"
#define CLEAVE_ABI_GRID_INDEX "cleave_rt_grid_index"
/* A CUDA program's GEMMs and collectives (device buffers, the process's
 * stream; in libcleave_rt_cuda): the names above with the CUDA prefix in
 * place of the CPU one, e.g. cleave_rt_cuda_sgemm,
 * cleave_rt_cuda_gemm_bf16, cleave_rt_cuda_all_reduce_f32. */
#define CLEAVE_ABI_PREFIX "cleave_rt_"
#define CLEAVE_ABI_CUDA_PREFIX "cleave_rt_cuda_"

/* Reduction codes of the collectives. */
#define CLEAVE_REDUCE_SUM 0
#define CLEAVE_REDUCE_MAX 1
#define CLEAVE_REDUCE_MIN 2
#define CLEAVE_REDUCE_PROD 3

#ifdef __cplusplus
extern "C" {
#endif

extern const char cleave_model_desc[];
void cleave_model_run(void **buffers);
/* Only in generation bundles: the runtime declares them weak. */
extern const char cleave_prefill_desc[];
void cleave_prefill_run(void **buffers);
extern const char cleave_generate_desc[];

/* GEMMs. For o < outer and i < batch, GEMM (o, i) computes
 *
 *   C[m x n] = A[m x k] * B[k x n] + bias + beta * C
 *
 * with float32 accumulation and a float32 C. Element (r, c) of operand X in
 * GEMM (o, i) is at element
 *
 *   offsetX + o * outerStrideX + i * batchStrideX + r * rowStrideX + c *
 * colStrideX
 *
 * of the buffer at X (an aligned base pointer passed as an integer). A and B
 * may each be row-major (colStride 1, rows rowStride apart) or column-major
 * (rowStride 1): BLAS reads the latter transposed (GemmLayout.h has the
 * rule, shared with the compiler). C is row-major, rows ldc apart. `bias` is
 * 0, or a float32 vector of n elements at element offsetBias, added to every
 * row (a cuBLASLt bias epilogue). Strided batches run in one BLAS call;
 * the outer loop (two batch dimensions that do not merge, like attention's
 * batch and heads read in place) makes one call per o.
 *
 *   cleave_rt_sgemm            A and B float32 (OpenBLAS)
 *   cleave_rt_gemm_<bf16|f16>  A and B 16-bit (--precision; widened onto
 *                              OpenBLAS, for numerics only)
 *   cleave_rt_gemm_<bf16|f16>_rounded
 *                              the same, writing the result rounded to the
 *                              operands' 16-bit type into a C of that type
 *                              (round to nearest even). beta must be 0 and
 *                              bias 0: cuBLASLt adds only a bias of its
 *                              result's type, which would round a float32
 *                              bias first.
 *   cleave_rt_igemm_<i8|i16>   A int16, B int8 or int16, C int32, summed
 *                              exactly in int32 (wrapping as two's
 *                              complement); beta is 0 (C overwritten) or
 *                              1 (added to), bias 0
 *   cleave_rt_cuda_...         the same on device memory through cuBLASLt
 *                              (float32: TF32 not enabled) */
#define CLEAVE_ABI_GEMM_PARAMS                                                 \
  int64_t outer, int64_t batch, int64_t m, int64_t n, int64_t k, intptr_t a,   \
      int64_t offsetA, int64_t outerStrideA, int64_t batchStrideA,             \
      int64_t rowStrideA, int64_t colStrideA, intptr_t b, int64_t offsetB,     \
      int64_t outerStrideB, int64_t batchStrideB, int64_t rowStrideB,          \
      int64_t colStrideB, intptr_t c, int64_t offsetC, int64_t outerStrideC,   \
      int64_t batchStrideC, int64_t ldc, intptr_t bias, int64_t offsetBias,    \
      float beta
/* The same names, as arguments, for passing the parameters on. */
#define CLEAVE_ABI_GEMM_ARGS                                                   \
  outer, batch, m, n, k, a, offsetA, outerStrideA, batchStrideA, rowStrideA,   \
      colStrideA, b, offsetB, outerStrideB, batchStrideB, rowStrideB,          \
      colStrideB, c, offsetC, outerStrideC, batchStrideC, ldc, bias,           \
      offsetBias, beta
void cleave_rt_sgemm(CLEAVE_ABI_GEMM_PARAMS);
void cleave_rt_gemm_bf16(CLEAVE_ABI_GEMM_PARAMS);
void cleave_rt_gemm_f16(CLEAVE_ABI_GEMM_PARAMS);
void cleave_rt_gemm_bf16_rounded(CLEAVE_ABI_GEMM_PARAMS);
void cleave_rt_gemm_f16_rounded(CLEAVE_ABI_GEMM_PARAMS);
/* A float32 GEMM by a MatMulNBits weight read where it lies: C (m x n,
 * rows ldc apart, from element offsetC) = A * B + bias + beta * C, A at
 * element offsetA with the given strides, B[i][j] = (code(j, i) -
 * zeros[j * blocks + i / blockSize]) * scales[the same], code(j, i) the
 * `bits`-bit code i (low-first in its byte) of column j's
 * blocks * blockSize * bits / 8 bytes from byte offsetCodes; zeros and
 * scales float32, row-major n x blocks, from their offsets; zeros 0 when
 * every zero point is `zero`. bias is 0 or n floats from offsetBias.
 * accuracyLevel is the node's: at 4, A may be quantized to int8 in blocks
 * of blockSize (symmetric, scale max|a| / 127) for the sum. */
#define CLEAVE_ABI_SGEMM_NBITS "cleave_rt_sgemm_nbits"
#define CLEAVE_ABI_NBITS_GEMM_PARAMS                                           \
  int64_t m, int64_t n, int64_t k, intptr_t a, int64_t offsetA,                \
      int64_t rowStrideA, int64_t colStrideA, intptr_t codes,                  \
      int64_t offsetCodes, intptr_t zeros, int64_t offsetZeros,                \
      intptr_t scales, int64_t offsetScales, int64_t blocks,                   \
      int64_t blockSize, int64_t bits, int64_t accuracyLevel, intptr_t c,      \
      int64_t offsetC, int64_t ldc, intptr_t bias, int64_t offsetBias,         \
      float zero, float beta
void cleave_rt_sgemm_nbits(CLEAVE_ABI_NBITS_GEMM_PARAMS);
void cleave_rt_igemm_i8(CLEAVE_ABI_GEMM_PARAMS);
void cleave_rt_igemm_i16(CLEAVE_ABI_GEMM_PARAMS);
void cleave_rt_cuda_sgemm(CLEAVE_ABI_GEMM_PARAMS);
void cleave_rt_cuda_gemm_bf16(CLEAVE_ABI_GEMM_PARAMS);
void cleave_rt_cuda_gemm_f16(CLEAVE_ABI_GEMM_PARAMS);
void cleave_rt_cuda_gemm_bf16_rounded(CLEAVE_ABI_GEMM_PARAMS);
void cleave_rt_cuda_gemm_f16_rounded(CLEAVE_ABI_GEMM_PARAMS);

/* Frees a buffer the program allocated on the device (gpu.alloc), managed
 * or device memory, in stream order. */
void cleave_rt_cuda_free(intptr_t pointer);
/* Returns once the program's stream has finished what it was given: before
 * host code reads or writes memory itself. */
void cleave_rt_cuda_synchronize(void);

/* The coordinate of this rank on mesh axis `axis`. */
int64_t cleave_rt_grid_index(int64_t axis);

/* Collectives over communicator `group` (a `group` line of the descriptor).
 * Buffers are MLIR unranked memrefs: the rank, then a pointer to the ranked
 * descriptor {allocated, aligned, offset, sizes[rank], strides[rank]}; the
 * data must be contiguous and row-major. One function per element type,
 * suffixed with the dtype name (f32 f64 f16 bf16 i64 i32 i16 i8 bool, as in
 * the descriptor); 16-bit floats are reduced in
 * float32. In a program compiled for one rank each is a copy.
 *
 *   all_reduce      out = reduce(in) over the group; same shape.
 *   all_gather      out = the group's `in` concatenated along `axis`, in
 *                   group order.
 *   reduce_scatter  out = part g (along `axis`) of reduce(in) on group
 *                   member g.
 *   all_to_all      `in` split along `splitAxis` into one part per member,
 *                   part j sent to member j; received parts concatenated
 *                   along `concatAxis` in group order.
 *   send / recv     point to point: `buffer` to / from group member `peer`
 *                   (its position in the group, first axis major). */
#define CLEAVE_ABI_DECLARE_COLLECTIVES(prefix, suffix)                         \
  void prefix##all_reduce_##suffix(int64_t inRank, void *in, int64_t outRank,  \
                                   void *out, int64_t reduction,               \
                                   int64_t group);                             \
  void prefix##all_gather_##suffix(int64_t inRank, void *in, int64_t outRank,  \
                                   void *out, int64_t axis, int64_t group);    \
  void prefix##reduce_scatter_##suffix(                                        \
      int64_t inRank, void *in, int64_t outRank, void *out, int64_t axis,      \
      int64_t reduction, int64_t group);                                       \
  void prefix##all_to_all_##suffix(int64_t inRank, void *in, int64_t outRank,  \
                                   void *out, int64_t splitAxis,               \
                                   int64_t concatAxis, int64_t group);         \
  void prefix##send_##suffix(int64_t rank, void *buffer, int64_t peer,         \
                             int64_t group);                                   \
  void prefix##recv_##suffix(int64_t rank, void *buffer, int64_t peer,         \
                             int64_t group);
/* The same collectives in a CUDA program (prefix cleave_rt_cuda_), on device
 * buffers, queued on the process's stream: through NCCL where the group's
 * ranks are on distinct GPUs, else staged through host memory and MPI. */
#define CLEAVE_ABI_DECLARE_ALL_COLLECTIVES(suffix)                             \
  CLEAVE_ABI_DECLARE_COLLECTIVES(cleave_rt_, suffix)                           \
  CLEAVE_ABI_DECLARE_COLLECTIVES(cleave_rt_cuda_, suffix)
CLEAVE_ABI_DECLARE_ALL_COLLECTIVES(f32)
CLEAVE_ABI_DECLARE_ALL_COLLECTIVES(f64)
CLEAVE_ABI_DECLARE_ALL_COLLECTIVES(f16)
CLEAVE_ABI_DECLARE_ALL_COLLECTIVES(bf16)
CLEAVE_ABI_DECLARE_ALL_COLLECTIVES(i64)
CLEAVE_ABI_DECLARE_ALL_COLLECTIVES(i32)
CLEAVE_ABI_DECLARE_ALL_COLLECTIVES(i16)
CLEAVE_ABI_DECLARE_ALL_COLLECTIVES(i8)
CLEAVE_ABI_DECLARE_ALL_COLLECTIVES(bool)
#undef CLEAVE_ABI_DECLARE_ALL_COLLECTIVES
#undef CLEAVE_ABI_DECLARE_COLLECTIVES

#ifdef __cplusplus
}
#endif

#endif /* CLEAVE_RUNTIME_ABI_H */
