//===- Passes.td - Sharding ---------------------------------*- tablegen -*-===//
//
// The sharding step as a pass, to test and replay it on an imported module:
// cleave-compile calls the same library function (applySharding) between
// the import and the partition phase.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_PASSES
#define CLEAVE_SHARDING_PASSES

include "mlir/Pass/PassBase.td"

def CleaveShard : Pass<"cleave-shard", "mlir::ModuleOp"> {
  let summary = "Annotate an imported module with a mesh and what to split";
  let description = [{
    What cleave-compile does after the import, for an `.mlir` module: adds
    the mesh (`shard.grid @mesh`), resolves the hints file's shardings
    against @main's arguments (by their `cleave.input` and `cleave.param`
    names; an imported module's inner tensors have no names left), adds
    the preset's for what the hints do not say, and annotates each with
    `shard.shard`; then records the hints file's fixed stage cuts. The
    partition phase (`--cleave-partition-pipeline='sharded=true'`) takes
    it from there.

    ```mlir
    // cleave-opt --cleave-shard='mesh=tp=2 preset=megatron'
    %0 = linalg.matmul ins(%x, %w1 ...)   // %w1 {cleave.param = "w1"}
    // becomes, with %w1 split by columns and %w2 by rows:
    shard.grid @mesh(shape = 2)
    %s = shard.sharding @mesh split_axes = [[], [0]] ...
    %w1s = shard.shard %w1 to %s ...
    ```
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "The mesh, e.g. tp=2 or pp=2,tp=2 (empty: leave the module alone)">,
    Option<"preset", "preset", "std::string", /*default=*/"\"\"",
           "A sharding preset for what the hints do not say: megatron">,
    Option<"hints", "hints", "std::string", /*default=*/"\"\"",
           "A YAML hints file (cleave-compile --shard-hints)">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

#endif // CLEAVE_SHARDING_PASSES
