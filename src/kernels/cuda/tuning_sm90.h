// kernels/cuda/tuning_sm90.h -- the tuning table of the CUDA NVFP4 GEMV (gemv_nvfp4_sm90.cu, gemv_nvfp4_sm90_repacked.cu).
//
// The table changes speed only: every entry computes the same function, checked against the
// oracle within the documented tolerance. (The K split changes the fp32 summation order, so
// two entries may differ in the last bits; each entry is deterministic run to run.)
//
// Key: compute capability (major*10+minor) + weight layout (canonical, or repacked for
// quantized_matmul_repacked: a different kernel, tuned separately) + shape class: an exact
// shape "exact/NxK" (the decode shapes of known models) or a bucket (N bucket x K bucket) + an
// optional row bucket m_max (8: M <= 8, 16: M = 9..16 per launch; 0: any M; the repacked kernel
// is a different instantiation for the two, and one tile does not suit both). Value: output
// columns per warp (16 or 32: results per warp are that times M), warps per block, and the K
// split (warps of a block that share the same columns and split K; warps_per_block / k_split
// column groups per block).
//
// Lookup order: the user table (JSON file named by env NVFP4_CUDA_TUNING, read once; exact
// class, then bucket; within each the entry of M's row bucket, then one for any M), then the
// built-in table (same order), then a rule of thumb. No
// CUDA headers here.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace nvfp4::cuda {

struct GemvTile {
  int cols_per_warp = 32;   // 16 or 32 (instantiated kernels); output rows per warp in the M = 1 wa kernel
  int warps_per_block = 4;  // 1..16
  int k_split = 1;          // divides warps_per_block
  // Forces the first (B = weights) kernel even where the weights-as-A kernel applies: for
  // side-by-side benchmarks and tests only; never in the table.
  bool legacy = false;
  // Repacked kernel: a caller's programmatic-dependent-launch request
  // (RepackedMatmulOptions::overlap_previous_kernel) is honoured with this tile; false where the
  // tuner measured the overlapped launch slower than the plain one. Speed only.
  bool overlap_ok = true;
  // Repacked M <= 8: a caller's early-weights request (RepackedMatmulOptions::weights_read_early)
  // is honoured with this tile. A looked-up tile has it only when it comes from an entry tuned
  // for that launch ("launch": "early"; the tuner writes one only where that launch measured
  // faster); an explicit tile (tests, the tuner) honours the request.
  bool early_ok = true;
};

enum class GemvLayout { kCanonical, kRepacked };
const char* gemv_layout_name(GemvLayout l);  // "canonical" / "repacked"

// "n_small/k_large" etc. N: small <= 6144 < mid <= 32768 < large. K: small <= 1024 < mid <= 8192 < large.
std::string gemv_shape_class(std::int64_t n, std::int64_t k);
// "exact/NxK": an entry for exactly this shape (checked before the bucket).
std::string gemv_exact_class(std::int64_t n, std::int64_t k);
// True for a bucket name or a well-formed "exact/NxK" (N, K > 0).
bool gemv_class_known(const std::string& cls);
// Why `cls` can never name a table entry, or "" if it can: not a known class, or an exact class
// whose K is not a multiple of 16 (no NVFP4 weight has that K). The table reader and `nvfp4 tune`
// both refuse such a name, with this text.
std::string gemv_class_problem(const std::string& cls);
// The tuner's classes: the 9 buckets, then the exact decode shapes of the built-in models
// (Llama-3-8B / 70B, Qwen3-32B / 4B: q/k/v/o, fused qkv, gate/up, fused gate+up, down, lm_head).
std::vector<std::string> gemv_shape_classes();
// A representative (N, K) for each class, used by the autotuner (exact: that shape).
void gemv_class_representative(const std::string& cls, std::int64_t* n, std::int64_t* k);

// True when t is a valid (instantiated) configuration.
bool gemv_tile_valid(const GemvTile& t);

// The tile for compute capability `cc` (e.g. 90), this shape and weight layout.
// m: rows of the call (M > 16 runs in launches of 16: the m_max 16 entry).
// early: the repacked kernel launched with weights read before the PDL wait
// (RepackedMatmulOptions::weights_read_early; the API asks at <= 16 virtual rows): an entry tuned
// for that launch if there is one (its tile has early_ok), else the ordinary entry.
GemvTile gemv_lookup_tile(int cc, std::int64_t n, std::int64_t k, GemvLayout layout = GemvLayout::kCanonical,
                          std::int64_t m = 1, bool early = false);

// Table I/O. JSON: {"version":1,"entries":[{"cc":90,"layout":"repacked","class":"n_small/k_large",
//   "m_max":8,"cols_per_warp":32,"warps_per_block":16,"k_split":16,"overlap":true}, ...]}
//   ("layout" absent: canonical; "m_max" absent or 0: any M; "overlap" absent: true;
//   "launch":"early" marks an entry tuned for the early-weights launch, repacked m_max 8 or 16).
struct GemvTableEntry {
  int cc = 90;
  std::string cls;
  GemvTile tile;
  double us = 0;  // measured median by the tuner (informative)
  GemvLayout layout = GemvLayout::kCanonical;
  int m_max = 0;  // 0: any M; 8: M <= 8; 16: M > 8
  bool early = false;  // tuned for the early-weights launch (gemv_lookup_tile's `early`)
};
// The entry of `table` for this key (exact class first, then bucket; with early, the early
// entries first); nullptr if none.
const GemvTableEntry* gemv_find_entry(const std::vector<GemvTableEntry>& table, int cc, std::int64_t n, std::int64_t k,
                                      GemvLayout layout, std::int64_t m = 1, bool early = false);
std::vector<GemvTableEntry> gemv_builtin_table();
std::string gemv_table_to_json(const std::vector<GemvTableEntry>& entries, const std::string& comment);
// Parses and validates; throws nvfp4::Error naming the file and the bad entry.
std::vector<GemvTableEntry> gemv_table_from_json(const std::string& text, const std::string& what);
// Replaces the user override (empty path: back to env/built-in). For tests and the tuner.
void gemv_set_user_table(const std::vector<GemvTableEntry>& entries);
// read_env_again: the next lookup reads NVFP4_CUDA_TUNING again (tests; tools that change it);
// otherwise the built-in table serves until a user table is set.
void gemv_clear_user_table(bool read_env_again = false);

// The autotuner behind `nvfp4 tune` (CUDA builds only; throws nvfp4::Error otherwise).
struct TuneOptions {
  std::vector<std::string> classes;  // empty: all classes
  std::vector<GemvLayout> layouts = {GemvLayout::kCanonical, GemvLayout::kRepacked};
  // Canonical: tuned at M = 1, entries for any M (m_max 0). Repacked: tuned at M = 1 (m_max 8)
  // and, with this set, at M = 16 (m_max 16): the M > 8 kernel wants other tiles (2026-11-30).
  bool repacked_m16 = true;
  // Repacked M = 1 and (repacked_m16) M = 16 also under the early-weights launch
  // (RepackedMatmulOptions::weights_read_early; at M = 16 the 16-row tiles): every such tile
  // timed that way too, the fastest written as a "launch": "early" entry where it is faster.
  bool repacked_early = true;
  // If set: the best early-launch entry of every class where none was written (the back-to-back
  // verdict was "not 2% faster"), for a caller that judges them another way (`nvfp4 tune`
  // checks them in a model's decode replay).
  std::vector<GemvTableEntry>* early_rejected = nullptr;
  int reps = 30;                     // timed launches per candidate (median)
  // Distinct weight copies rotated through per class, in MiB: > 3x the 60 MB L2 so every launch
  // streams from HBM. Tests lower it (the tables they get are not meant to be fast).
  int rotation_mib = 256;
  bool verbose = true;  // one line per candidate and per class on stderr (stdout may carry the table)
};
std::vector<GemvTableEntry> gemv_autotune(const TuneOptions& opts);

}  // namespace nvfp4::cuda
