// kernels/cuda/tuning_sm90.h -- the tuning table of the CUDA NVFP4 GEMV (gemv_nvfp4_sm90.cu).
//
// The table changes speed only: every entry computes the same function, checked against the
// oracle within the documented tolerance. (The K split changes the fp32 summation order, so
// two entries may differ in the last bits; each entry is deterministic run to run.)
//
// Key: compute capability (major*10+minor) + shape class (N bucket x K bucket). Value: output
// columns per warp (16 or 32: results per warp are that times M), warps per block, and the K
// split (warps of a block that share the same columns and split K; warps_per_block / k_split
// column groups per block).
//
// Lookup order: a user table (JSON file named by env NVFP4_CUDA_TUNING, read once) overrides
// the built-in table; a missing entry falls back to a rule of thumb. No CUDA headers here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nvfp4::cuda {

struct GemvTile {
  int cols_per_warp = 32;   // 16 or 32 (instantiated kernels); output rows per warp in the M = 1 wa kernel
  int warps_per_block = 4;  // 1..16
  int k_split = 1;          // divides warps_per_block
  // Forces the first (B = weights) kernel even where the weights-as-A kernel applies: for
  // side-by-side benchmarks and tests only; never in the table.
  bool legacy = false;
};

// "n_small/k_large" etc. N: small <= 6144 < mid <= 32768 < large. K: small <= 1024 < mid <= 8192 < large.
std::string gemv_shape_class(std::int64_t n, std::int64_t k);
std::vector<std::string> gemv_shape_classes();
// A representative (N, K) for each class, used by the autotuner.
void gemv_class_representative(const std::string& cls, std::int64_t* n, std::int64_t* k);

// True when t is a valid (instantiated) configuration.
bool gemv_tile_valid(const GemvTile& t);

// The tile for compute capability `cc` (e.g. 90) and this shape.
GemvTile gemv_lookup_tile(int cc, std::int64_t n, std::int64_t k);

// Table I/O. JSON: {"version":1,"entries":[{"cc":90,"class":"n_small/k_large",
//   "cols_per_warp":32,"warps_per_block":16,"k_split":16}, ...]}
struct GemvTableEntry {
  int cc = 90;
  std::string cls;
  GemvTile tile;
  double us = 0;  // measured median by the tuner (informative, 0 in the built-in table)
};
std::vector<GemvTableEntry> gemv_builtin_table();
std::string gemv_table_to_json(const std::vector<GemvTableEntry>& entries, const std::string& comment);
// Parses and validates; throws nvfp4::Error naming the file and the bad entry.
std::vector<GemvTableEntry> gemv_table_from_json(const std::string& text, const std::string& what);
// Replaces the user override (empty path: back to env/built-in). For tests and the tuner.
void gemv_set_user_table(const std::vector<GemvTableEntry>& entries);
void gemv_clear_user_table();

// The autotuner behind `nvfp4 tune` (CUDA builds only; throws nvfp4::Error otherwise).
struct TuneOptions {
  std::vector<std::string> classes;  // empty: all classes
  int reps = 30;                     // timed launches per candidate (median)
  bool verbose = true;
};
std::vector<GemvTableEntry> gemv_autotune(const TuneOptions& opts);

}  // namespace nvfp4::cuda
