// Tests what cleave-emulate-gpu-kernels makes of a warp's MMA, a butterfly
// shuffle and a barrier inside a loop, by running it: the kernels below are
// emulated, lowered to LLVM with upstream's passes and run by lli. @main
// returns 0 when every kernel's result matches a reference computed in
// plain loops: 1 for the MMA (D = A x B + C on one warp, its fragments
// loaded as PTX's tables for mma.m16n8k16 with .bf16 describe them: lane l,
// g = l / 4, q = l % 4; A register r holds row g + 8 (r % 2), columns
// 2q + 8 (r / 2) and one more; B register r rows 2q + 8 r and one more of
// column g; D float i row g + 8 (i / 2), column 2q + i % 2), 2 for the
// shuffle, 3 for the loop, 4 if the MMA's reference is all zeros (a test
// that could not fail), 5 if the MMA with B's registers loaded by
// nvgpu.ldmatrix from shared memory (from B transposed, and transposing as
// it loads from B) differs from the one with B's registers loaded by hand.
// RUN: cleave-opt %s --cleave-emulate-gpu-kernels > %t.emulated.mlir
// RUN: FileCheck %s < %t.emulated.mlir
// RUN: mlir-opt %t.emulated.mlir --pass-pipeline='builtin.module(convert-scf-to-cf, convert-vector-to-llvm, expand-strided-metadata, finalize-memref-to-llvm, convert-math-to-llvm, convert-arith-to-llvm, convert-index-to-llvm, convert-func-to-llvm, convert-cf-to-llvm, reconcile-unrealized-casts)' | mlir-translate --mlir-to-llvmir > %t.ll
// RUN: lli %t.ll

// The emulation leaves no GPU or NVVM op, and no LLVM struct.
// CHECK-LABEL: func.func @mma
// CHECK-NOT: gpu.
// CHECK-NOT: nvvm.
// CHECK-NOT: llvm.
// CHECK-LABEL: func.func @shuffle
// CHECK-NOT: gpu.
// CHECK-LABEL: func.func @barrier_in_loop
// CHECK-NOT: gpu.
// CHECK-LABEL: func.func @ldmatrix_mma
// CHECK-NOT: nvgpu.

// Two bf16 as one i32, `lo` in the low half.
func.func @pack(%lo: bf16, %hi: bf16) -> i32 {
  %c16 = arith.constant 16 : i32
  %l = arith.bitcast %lo : bf16 to i16
  %h = arith.bitcast %hi : bf16 to i16
  %l32 = arith.extui %l : i16 to i32
  %h32 = arith.extui %h : i16 to i32
  %hs = arith.shli %h32, %c16 : i32
  %p = arith.ori %hs, %l32 : i32
  return %p : i32
}

// D (16 x 8) = A (16 x 16) x B (16 x 8) + 0.5, on one warp.
func.func @mma(%a: memref<16x16xbf16>, %b: memref<16x8xbf16>, %d: memref<16x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %half = arith.constant 0.5 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%t, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %g = arith.divui %t, %c4 : index
    %q = arith.remui %t, %c4 : index
    %g8 = arith.addi %g, %c8 : index
    %q2 = arith.muli %q, %c2 : index
    %q2b = arith.addi %q2, %c1 : index
    %q2h = arith.addi %q2, %c8 : index
    %q2hb = arith.addi %q2h, %c1 : index
    // A: r = 0 (g, 2q), 1 (g + 8, 2q), 2 (g, 2q + 8), 3 (g + 8, 2q + 8).
    %a00 = memref.load %a[%g, %q2] : memref<16x16xbf16>
    %a01 = memref.load %a[%g, %q2b] : memref<16x16xbf16>
    %a10 = memref.load %a[%g8, %q2] : memref<16x16xbf16>
    %a11 = memref.load %a[%g8, %q2b] : memref<16x16xbf16>
    %a20 = memref.load %a[%g, %q2h] : memref<16x16xbf16>
    %a21 = memref.load %a[%g, %q2hb] : memref<16x16xbf16>
    %a30 = memref.load %a[%g8, %q2h] : memref<16x16xbf16>
    %a31 = memref.load %a[%g8, %q2hb] : memref<16x16xbf16>
    %r0 = func.call @pack(%a00, %a01) : (bf16, bf16) -> i32
    %r1 = func.call @pack(%a10, %a11) : (bf16, bf16) -> i32
    %r2 = func.call @pack(%a20, %a21) : (bf16, bf16) -> i32
    %r3 = func.call @pack(%a30, %a31) : (bf16, bf16) -> i32
    // B: r = 0 rows 2q, 2q + 1; r = 1 rows 2q + 8, 2q + 9; column g.
    %b00 = memref.load %b[%q2, %g] : memref<16x8xbf16>
    %b01 = memref.load %b[%q2b, %g] : memref<16x8xbf16>
    %b10 = memref.load %b[%q2h, %g] : memref<16x8xbf16>
    %b11 = memref.load %b[%q2hb, %g] : memref<16x8xbf16>
    %s0 = func.call @pack(%b00, %b01) : (bf16, bf16) -> i32
    %s1 = func.call @pack(%b10, %b11) : (bf16, bf16) -> i32
    %res = nvvm.mma.sync A[%r0, %r1, %r2, %r3] B[%s0, %s1] C[%half, %half, %half, %half]
      {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>,
       multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>,
       shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
    %d0 = llvm.extractvalue %res[0] : !llvm.struct<(f32, f32, f32, f32)>
    %d1 = llvm.extractvalue %res[1] : !llvm.struct<(f32, f32, f32, f32)>
    %d2 = llvm.extractvalue %res[2] : !llvm.struct<(f32, f32, f32, f32)>
    %d3 = llvm.extractvalue %res[3] : !llvm.struct<(f32, f32, f32, f32)>
    memref.store %d0, %d[%g, %q2] : memref<16x8xf32>
    memref.store %d1, %d[%g, %q2b] : memref<16x8xf32>
    memref.store %d2, %d[%g8, %q2] : memref<16x8xf32>
    memref.store %d3, %d[%g8, %q2b] : memref<16x8xf32>
    gpu.terminator
  }
  return
}

// out[t] = the value of thread t xor 1 (lane t's value is t), in a block of
// two warps.
func.func @shuffle(%out: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1 : i32
  %width = arith.constant 32 : i32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%t, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %ti = arith.index_cast %t : index to i32
    %v = arith.sitofp %ti : i32 to f32
    %r, %valid = gpu.shuffle xor %v, %one, %width : f32
    memref.store %r, %out[%t] : memref<64xf32>
    gpu.terminator
  }
  return
}

// Eight threads, three rounds: each writes its value to shared memory and,
// after a barrier, adds its right neighbour's (cyclically).
func.func @barrier_in_loop(%out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%t, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1)
             workgroup(%row : memref<8xf32, #gpu.address_space<workgroup>>) {
    %ti = arith.index_cast %t : index to i32
    %init = arith.sitofp %ti : i32 to f32
    %next = arith.addi %t, %c1 : index
    %right = arith.remui %next, %c8 : index
    %sum = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %init) -> (f32) {
      memref.store %acc, %row[%t] : memref<8xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %n = memref.load %row[%right] : memref<8xf32, #gpu.address_space<workgroup>>
      %new = arith.addf %acc, %n : f32
      gpu.barrier
      scf.yield %new : f32
    }
    memref.store %sum, %out[%t] : memref<8xf32>
    gpu.terminator
  }
  return
}

// D1 and D2 = A x B + 0.5 as @mma computes it, B's registers loaded from
// shared memory by ldmatrix: for D1 from B transposed (8 x 16, B's columns
// as rows, as the MMA's B registers hold them: two matrices, k 0-7 and
// 8-15), for D2 from B as it is (16 x 8, k rows), transposed as it loads
// (two matrices, k 0-7 and 8-15). Lanes 16-31 give addresses that .x2
// ignores.
func.func @ldmatrix_mma(%a: memref<16x16xbf16>, %b: memref<16x8xbf16>, %d1: memref<16x8xf32>, %d2: memref<16x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %half = arith.constant 0.5 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%t, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%bt : memref<8x16xbf16, #gpu.address_space<workgroup>>,
                       %bs : memref<16x8xbf16, #gpu.address_space<workgroup>>) {
    // Each thread copies 4 of B's 128 elements into both tiles.
    scf.for %e = %c0 to %c4 step %c1 {
      %t4 = arith.muli %t, %c4 : index
      %i = arith.addi %t4, %e : index
      %k = arith.divui %i, %c8 : index
      %n = arith.remui %i, %c8 : index
      %x = memref.load %b[%k, %n] : memref<16x8xbf16>
      memref.store %x, %bs[%k, %n] : memref<16x8xbf16, #gpu.address_space<workgroup>>
      memref.store %x, %bt[%n, %k] : memref<8x16xbf16, #gpu.address_space<workgroup>>
    }
    gpu.barrier
    %g = arith.divui %t, %c4 : index
    %q = arith.remui %t, %c4 : index
    %g8 = arith.addi %g, %c8 : index
    %q2 = arith.muli %q, %c2 : index
    %q2b = arith.addi %q2, %c1 : index
    %q2h = arith.addi %q2, %c8 : index
    %q2hb = arith.addi %q2h, %c1 : index
    %a00 = memref.load %a[%g, %q2] : memref<16x16xbf16>
    %a01 = memref.load %a[%g, %q2b] : memref<16x16xbf16>
    %a10 = memref.load %a[%g8, %q2] : memref<16x16xbf16>
    %a11 = memref.load %a[%g8, %q2b] : memref<16x16xbf16>
    %a20 = memref.load %a[%g, %q2h] : memref<16x16xbf16>
    %a21 = memref.load %a[%g, %q2hb] : memref<16x16xbf16>
    %a30 = memref.load %a[%g8, %q2h] : memref<16x16xbf16>
    %a31 = memref.load %a[%g8, %q2hb] : memref<16x16xbf16>
    %r0 = func.call @pack(%a00, %a01) : (bf16, bf16) -> i32
    %r1 = func.call @pack(%a10, %a11) : (bf16, bf16) -> i32
    %r2 = func.call @pack(%a20, %a21) : (bf16, bf16) -> i32
    %r3 = func.call @pack(%a30, %a31) : (bf16, bf16) -> i32
    // Lane l addresses row l % 8 of matrix (l / 8) % 2.
    %row = arith.remui %t, %c8 : index
    %m8 = arith.divui %t, %c8 : index
    %m = arith.remui %m8, %c2 : index
    %col8 = arith.muli %m, %c8 : index
    %row8 = arith.addi %row, %col8 : index
    %lt = nvgpu.ldmatrix %bt[%row, %col8] {numTiles = 2 : i32, transpose = false} : memref<8x16xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
    %ls = nvgpu.ldmatrix %bs[%row8, %c0] {numTiles = 2 : i32, transpose = true} : memref<16x8xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
    %lt0 = vector.extract %lt[0] : vector<2xbf16> from vector<2x2xbf16>
    %lt1 = vector.extract %lt[1] : vector<2xbf16> from vector<2x2xbf16>
    %ls0 = vector.extract %ls[0] : vector<2xbf16> from vector<2x2xbf16>
    %ls1 = vector.extract %ls[1] : vector<2xbf16> from vector<2x2xbf16>
    %wt0 = vector.bitcast %lt0 : vector<2xbf16> to vector<1xi32>
    %wt1 = vector.bitcast %lt1 : vector<2xbf16> to vector<1xi32>
    %ws0 = vector.bitcast %ls0 : vector<2xbf16> to vector<1xi32>
    %ws1 = vector.bitcast %ls1 : vector<2xbf16> to vector<1xi32>
    %t0 = vector.extract %wt0[0] : i32 from vector<1xi32>
    %t1 = vector.extract %wt1[0] : i32 from vector<1xi32>
    %s0 = vector.extract %ws0[0] : i32 from vector<1xi32>
    %s1 = vector.extract %ws1[0] : i32 from vector<1xi32>
    %res1 = nvvm.mma.sync A[%r0, %r1, %r2, %r3] B[%t0, %t1] C[%half, %half, %half, %half]
      {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>,
       multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>,
       shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
    %res2 = nvvm.mma.sync A[%r0, %r1, %r2, %r3] B[%s0, %s1] C[%half, %half, %half, %half]
      {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>,
       multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>,
       shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
    %e0 = llvm.extractvalue %res1[0] : !llvm.struct<(f32, f32, f32, f32)>
    %e1 = llvm.extractvalue %res1[1] : !llvm.struct<(f32, f32, f32, f32)>
    %e2 = llvm.extractvalue %res1[2] : !llvm.struct<(f32, f32, f32, f32)>
    %e3 = llvm.extractvalue %res1[3] : !llvm.struct<(f32, f32, f32, f32)>
    memref.store %e0, %d1[%g, %q2] : memref<16x8xf32>
    memref.store %e1, %d1[%g, %q2b] : memref<16x8xf32>
    memref.store %e2, %d1[%g8, %q2] : memref<16x8xf32>
    memref.store %e3, %d1[%g8, %q2b] : memref<16x8xf32>
    %f0 = llvm.extractvalue %res2[0] : !llvm.struct<(f32, f32, f32, f32)>
    %f1 = llvm.extractvalue %res2[1] : !llvm.struct<(f32, f32, f32, f32)>
    %f2 = llvm.extractvalue %res2[2] : !llvm.struct<(f32, f32, f32, f32)>
    %f3 = llvm.extractvalue %res2[3] : !llvm.struct<(f32, f32, f32, f32)>
    memref.store %f0, %d2[%g, %q2] : memref<16x8xf32>
    memref.store %f1, %d2[%g, %q2b] : memref<16x8xf32>
    memref.store %f2, %d2[%g8, %q2] : memref<16x8xf32>
    memref.store %f3, %d2[%g8, %q2b] : memref<16x8xf32>
    gpu.terminator
  }
  return
}

func.func @main() -> i32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %f0 = arith.constant 0.0 : f32
  %fhalf = arith.constant 0.5 : f32
  %f2 = arith.constant 2.0 : f32
  %f3 = arith.constant 3.0 : f32
  %tol = arith.constant 1.0e-3 : f32
  %ok = arith.constant 0 : i32
  %i1 = arith.constant 1 : i32
  %i2 = arith.constant 2 : i32
  %i3 = arith.constant 3 : i32
  %i4 = arith.constant 4 : i32
  %i5 = arith.constant 5 : i32
  %false = arith.constant false
  %true = arith.constant true
  %a = memref.alloc() : memref<16x16xbf16>
  %b = memref.alloc() : memref<16x8xbf16>
  %d = memref.alloc() : memref<16x8xf32>
  // A[m][k] = (16 m + k) % 7 - 3, B[k][n] = (8 k + n) % 5 - 2: small
  // integers, exact in bf16.
  scf.for %m = %c0 to %c16 step %c1 {
    scf.for %k = %c0 to %c16 step %c1 {
      %x = arith.muli %m, %c16 : index
      %y = arith.addi %x, %k : index
      %z = arith.remui %y, %c7 : index
      %zi = arith.index_cast %z : index to i32
      %zf = arith.sitofp %zi : i32 to f32
      %v = arith.subf %zf, %f3 : f32
      %vb = arith.truncf %v : f32 to bf16
      memref.store %vb, %a[%m, %k] : memref<16x16xbf16>
    }
  }
  scf.for %k = %c0 to %c16 step %c1 {
    scf.for %n = %c0 to %c8 step %c1 {
      %x = arith.muli %k, %c8 : index
      %y = arith.addi %x, %n : index
      %z = arith.remui %y, %c5 : index
      %zi = arith.index_cast %z : index to i32
      %zf = arith.sitofp %zi : i32 to f32
      %v = arith.subf %zf, %f2 : f32
      %vb = arith.truncf %v : f32 to bf16
      memref.store %vb, %b[%k, %n] : memref<16x8xbf16>
    }
  }
  func.call @mma(%a, %b, %d) : (memref<16x16xbf16>, memref<16x8xbf16>, memref<16x8xf32>) -> ()
  // The reference: 0.5 + sum over k of A[m][k] B[k][n].
  %mmaBad, %anyRef = scf.for %m = %c0 to %c16 step %c1 iter_args(%bad0 = %false, %nz0 = %false) -> (i1, i1) {
    %bad1, %nz1 = scf.for %n = %c0 to %c8 step %c1 iter_args(%bad = %bad0, %nz = %nz0) -> (i1, i1) {
      %ref = scf.for %k = %c0 to %c16 step %c1 iter_args(%acc = %fhalf) -> (f32) {
        %x = memref.load %a[%m, %k] : memref<16x16xbf16>
        %y = memref.load %b[%k, %n] : memref<16x8xbf16>
        %xf = arith.extf %x : bf16 to f32
        %yf = arith.extf %y : bf16 to f32
        %p = arith.mulf %xf, %yf : f32
        %s = arith.addf %acc, %p : f32
        scf.yield %s : f32
      }
      %got = memref.load %d[%m, %n] : memref<16x8xf32>
      %diff = arith.subf %got, %ref : f32
      %abs = math.absf %diff : f32
      %off = arith.cmpf ugt, %abs, %tol : f32
      %bad2 = arith.ori %bad, %off : i1
      %isHalf = arith.cmpf one, %ref, %fhalf : f32
      %nz2 = arith.ori %nz, %isHalf : i1
      scf.yield %bad2, %nz2 : i1, i1
    }
    scf.yield %bad1, %nz1 : i1, i1
  }
  %s = memref.alloc() : memref<64xf32>
  func.call @shuffle(%s) : (memref<64xf32>) -> ()
  %shuffleBad = scf.for %t = %c0 to %c64 step %c1 iter_args(%bad = %false) -> (i1) {
    %partner = arith.xori %t, %c1 : index
    %pi = arith.index_cast %partner : index to i32
    %pf = arith.sitofp %pi : i32 to f32
    %got = memref.load %s[%t] : memref<64xf32>
    %off = arith.cmpf une, %got, %pf : f32
    %bad2 = arith.ori %bad, %off : i1
    scf.yield %bad2 : i1
  }
  // The loop's reference: three rounds of v[t] += v[(t + 1) % 8] in plain
  // loops, from v[t] = t.
  %o = memref.alloc() : memref<8xf32>
  func.call @barrier_in_loop(%o) : (memref<8xf32>) -> ()
  %v = memref.alloc() : memref<8xf32>
  %w = memref.alloc() : memref<8xf32>
  scf.for %t = %c0 to %c8 step %c1 {
    %ti = arith.index_cast %t : index to i32
    %tf = arith.sitofp %ti : i32 to f32
    memref.store %tf, %v[%t] : memref<8xf32>
  }
  scf.for %round = %c0 to %c3 step %c1 {
    scf.for %t = %c0 to %c8 step %c1 {
      %next = arith.addi %t, %c1 : index
      %r = arith.remui %next, %c8 : index
      %x = memref.load %v[%t] : memref<8xf32>
      %y = memref.load %v[%r] : memref<8xf32>
      %z = arith.addf %x, %y : f32
      memref.store %z, %w[%t] : memref<8xf32>
    }
    memref.copy %w, %v : memref<8xf32> to memref<8xf32>
  }
  %loopBad = scf.for %t = %c0 to %c8 step %c1 iter_args(%bad = %false) -> (i1) {
    %x = memref.load %v[%t] : memref<8xf32>
    %y = memref.load %o[%t] : memref<8xf32>
    %off = arith.cmpf une, %x, %y : f32
    %bad2 = arith.ori %bad, %off : i1
    scf.yield %bad2 : i1
  }
  // ldmatrix: both products exactly as @mma's (small integers, exact).
  %d1 = memref.alloc() : memref<16x8xf32>
  %d2 = memref.alloc() : memref<16x8xf32>
  func.call @ldmatrix_mma(%a, %b, %d1, %d2) : (memref<16x16xbf16>, memref<16x8xbf16>, memref<16x8xf32>, memref<16x8xf32>) -> ()
  %ldBad = scf.for %m = %c0 to %c16 step %c1 iter_args(%bad0 = %false) -> (i1) {
    %bad1 = scf.for %n = %c0 to %c8 step %c1 iter_args(%bad = %bad0) -> (i1) {
      %x = memref.load %d[%m, %n] : memref<16x8xf32>
      %y1 = memref.load %d1[%m, %n] : memref<16x8xf32>
      %y2 = memref.load %d2[%m, %n] : memref<16x8xf32>
      %o1 = arith.cmpf une, %x, %y1 : f32
      %o2 = arith.cmpf une, %x, %y2 : f32
      %either = arith.ori %o1, %o2 : i1
      %bad2 = arith.ori %bad, %either : i1
      scf.yield %bad2 : i1
    }
    scf.yield %bad1 : i1
  }
  %noRef = arith.xori %anyRef, %true : i1
  %r5 = arith.select %ldBad, %i5, %ok : i32
  %r4 = arith.select %noRef, %i4, %r5 : i32
  %r3 = arith.select %loopBad, %i3, %r4 : i32
  %r2 = arith.select %shuffleBad, %i2, %r3 : i32
  %r1 = arith.select %mmaBad, %i1, %r2 : i32
  return %r1 : i32
}
