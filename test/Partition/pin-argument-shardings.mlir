// Tests that every tensor argument ends up with exactly one shard.shard user
// that defines its sharding, and that the sharding is recorded on it.
// RUN: cleave-opt %s --allow-unregistered-dialect --pass-pipeline='builtin.module(func.func(cleave-pin-argument-shardings))' | FileCheck %s

// CHECK-LABEL: func.func @pins
// CHECK-SAME: %[[A:.*]]: tensor<4x8xf32> {cleave.sharding = [array<i16>, array<i16: 0>]}
// CHECK-SAME: %[[B:.*]]: tensor<4x8xf32> {cleave.sharding = [array<i16>, array<i16>]}
// CHECK-SAME: %[[C:.*]]: tensor<8xf32> {cleave.sharding = [array<i16: 0>]}
// Annotated only for its users (%c): pinned to that sharding at the top,
// and its users go through the pin. Not annotated at all (%b): pinned whole.
// Already pinned (%a): left alone.
// CHECK-DAG: %[[SC:.*]] = shard.sharding @mesh split_axes = {{\[}}[0]]
// CHECK-DAG: %[[PC:.*]] = shard.shard %[[C]] to %[[SC]] : tensor<8xf32>
// CHECK-DAG: %[[SB:.*]] = shard.sharding @mesh split_axes = {{\[}}[]]
// CHECK-DAG: %[[PB:.*]] = shard.shard %[[B]] to %[[SB]] : tensor<4x8xf32>
// CHECK-DAG: %[[SA:.*]] = shard.sharding @mesh split_axes = {{\[}}[], [0]]
// CHECK-DAG: %[[PA:.*]] = shard.shard %[[A]] to %[[SA]] : tensor<4x8xf32>
// CHECK: %[[UC:.*]] = shard.shard %[[PC]] to %{{.*}} annotate_for_users
// CHECK: "test.use"(%[[PB]])
// CHECK: "test.use"(%[[PA]], %[[UC]])
shard.grid @mesh(shape = 2)
func.func @pins(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<8xf32>) {
  %sa = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %0 = shard.shard %a to %sa : tensor<4x8xf32>
  %sc = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %1 = shard.shard %c to %sc annotate_for_users : tensor<8xf32>
  "test.use"(%b) : (tensor<4x8xf32>) -> ()
  "test.use"(%0, %1) : (tensor<4x8xf32>, tensor<8xf32>) -> ()
  return
}

// A graph input that propagation split (a defining annotation, not a hint's
// annotation for users): pinned whole, every rank reading the whole file,
// and its users slice it through the split annotation.
// CHECK-LABEL: func.func @input
// CHECK-SAME: %[[X:.*]]: tensor<4x8xf32> {cleave.input = "x", cleave.sharding = [array<i16>, array<i16>]}
// CHECK: %[[WHOLE:.*]] = shard.sharding @mesh split_axes = {{\[}}[]]
// CHECK: %[[PX:.*]] = shard.shard %[[X]] to %[[WHOLE]] : tensor<4x8xf32>
// CHECK: %[[SPLIT:.*]] = shard.shard %[[PX]] to %{{.*}} : tensor<4x8xf32>
// CHECK: "test.use"(%[[SPLIT]])
func.func @input(%x: tensor<4x8xf32> {cleave.input = "x"}) {
  %s = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %0 = shard.shard %x to %s : tensor<4x8xf32>
  "test.use"(%0) : (tensor<4x8xf32>) -> ()
  return
}
