// io/layouts.h -- internal: every checkpoint-layout name and config value in one place, so a
// correction from the format research is a one-line change here (docs/nvfp4-format.md).
#pragma once

namespace nvfp4::layouts {

// modelopt (TensorRT Model Optimizer)
constexpr const char* kModeloptPacked = ".weight";            // U8 [N, K/2]
constexpr const char* kModeloptScales = ".weight_scale";      // F8_E4M3 [N, K/16]
constexpr const char* kModeloptTensorScale = ".weight_scale_2";  // F32 [] = amax / 2688
constexpr const char* kModeloptInputScale = ".input_scale";   // F32 [], W4A4 exports only
constexpr const char* kModeloptProducer = "modelopt";
// The weight-only algorithm: what modelopt's own W4A16_NVFP4_CFG export writes (modelopt 0.47,
// checked in scripts/check_producers.sh) and what vLLM routes to its W4A16 NVFP4 (Marlin) method.
// "NVFP4" names the W4A4 algorithm, whose loaders expect an input_scale per linear; nvfp4 writes
// none. Reading accepts either.
constexpr const char* kModeloptQuantAlgo = "W4A16_NVFP4";
constexpr const char* kModeloptQuantMethod = "modelopt";
constexpr const char* kHfQuantConfigFile = "hf_quant_config.json";

// compressed-tensors (llm-compressor)
constexpr const char* kCtPacked = ".weight_packed";              // U8 [N, K/2]
constexpr const char* kCtScales = ".weight_scale";               // F8_E4M3 [N, K/16]
constexpr const char* kCtTensorScale = ".weight_global_scale";   // F32 [1] = 2688 / amax
constexpr const char* kCtInputScale = ".input_global_scale";     // F32 [1], W4A4 only
constexpr const char* kCtWeightShape = ".weight_shape";          // optional I64 [2]
constexpr const char* kCtQuantMethod = "compressed-tensors";
constexpr const char* kCtFormat = "nvfp4-pack-quantized";

// MLX (mx.quantize mode="nvfp4")
constexpr const char* kMlxPacked = ".weight";        // U32 [N, K/8], element j in bits 4j..4j+3
constexpr const char* kMlxScales = ".scales";        // U8 [N, K/16], E4M3 bits
constexpr const char* kMlxTensorScale = ".global_scale";  // F32 [] = amax; optional (mlx-lm writes none)
constexpr const char* kMlxMode = "nvfp4";

// Hugging Face folder files
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kConfigFile = "config.json";

}  // namespace nvfp4::layouts
