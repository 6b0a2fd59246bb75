"""Writes a copy of an ONNX model whose nodes carry ONNX's pipeline_stage
field (NodeDeviceConfigurationProto, IR 11): stage 0 up to the first node
whose name starts with each given prefix, then 1, 2, ...

Usage: set_pipeline_stages.py MODEL.onnx OUT.onnx PREFIX [PREFIX...]"""
import sys

import onnx

model = onnx.load(sys.argv[1])
prefixes = sys.argv[3:]
stage = 0
for node in model.graph.node:
    if stage < len(prefixes) and node.name.startswith(prefixes[stage]):
        stage += 1
    config = node.device_configurations.add()
    config.configuration_id = "pipeline"
    config.pipeline_stage = stage
onnx.save(model, sys.argv[2])
