// kernels/cuda/tuning_sm90.cpp -- the GEMV tuning table: built-in entries, JSON I/O, lookup.
// The entries change speed only, never the function computed (see tuning_sm90.h).
#include "kernels/cuda/tuning_sm90.h"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <fstream>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "nvfp4/error.h"

namespace nvfp4::cuda {
namespace {

const char* kBuckets[] = {"n_small/k_small", "n_small/k_mid", "n_small/k_large",
                          "n_mid/k_small",   "n_mid/k_mid",   "n_mid/k_large",
                          "n_large/k_small", "n_large/k_mid", "n_large/k_large"};

// Exact classes: Llama-3-8B decode (q/k/v/o N=1024..4096 K=4096, fused qkv 6144x4096, gate/up
// 14336x4096, fused gate+up 28672x4096, down 4096x14336, lm_head 128256x4096).
const std::int64_t kExact[][2] = {{1024, 4096},  {4096, 4096},  {6144, 4096},  {14336, 4096},
                                  {28672, 4096}, {4096, 14336}, {128256, 4096}};

// A repacked tile with which the opt-in overlapped (PDL) launch measured more than 2% slower
// than the plain one: the request is not honoured for that class (tuning_sm90.h, overlap_ok).
constexpr GemvTile no_overlap(GemvTile t) {
  t.overlap_ok = false;
  return t;
}

// Built-in table for Hopper (cc 90), written by `nvfp4 tune` on an H200 (docs/perf-cuda.md
// has the runs). Changes speed only.
const GemvTableEntry kBuiltin[] = {
    // `nvfp4 tune` on an H200, 2026-11-30 (M=1 bf16, rotated weights, CUDA graph medians, us).
    {90, "n_small/k_small", {16, 4, 4}, 3.29},   // 4096 x 512
    {90, "n_small/k_mid", {16, 8, 8}, 8.64},     // 4096 x 4096
    {90, "n_small/k_large", {16, 8, 8}, 21.90},  // 4096 x 14336
    {90, "n_mid/k_small", {32, 8, 4}, 8.00},     // 16384 x 1024
    {90, "n_mid/k_mid", {32, 4, 4}, 37.76},      // 28672 x 4096
    {90, "n_mid/k_large", {32, 8, 4}, 75.50},    // 16384 x 16384
    {90, "n_large/k_small", {32, 1, 1}, 41.67},  // 131072 x 1024
    {90, "n_large/k_mid", {32, 4, 2}, 106.65},   // 151936 x 2560
    {90, "n_large/k_large", {32, 4, 4}, 216.20}, // 65536 x 12288
    // Repacked layout (quantized_matmul_repacked, gemv_nvfp4_rp_kernel): `nvfp4 tune --layout
    // repacked` on an H200, 2026-12-02 09:44 UTC, commit 985ba2d (M=1 and M=16 bf16, weights
    // rotated through >= 256 MiB, CUDA graph medians, us; bench/results/
    // cuda-2026-12-02-h200-tuning-rp-985ba2d.json, its log beside it). It replaced the tables of
    // 2026-11-30 / 12-02 00:37, tuned before later kernel changes: with this one the Llama-3-8B
    // decode measured 2.50% faster [2.37, 2.68] against the old table (`nvfp4 compare`, same H200,
    // same run; docs/perf-cuda.md 45), mostly from the k/v early tile (2.70 against 3.02 us with
    // 32 rows per warp) and lm_head (71.96 against 76.37 us with 4 warps, K split 2).
    // M <= 8, the ordinary launch (overlapped unless no_overlap: the overlapped launch measured
    // more than 2% slower than the plain one for that tile).
    {90, "n_small/k_small", {16, 4, 4}, 2.37, GemvLayout::kRepacked, 8},              // 4096 x 512
    {90, "n_small/k_mid", {16, 16, 16}, 4.28, GemvLayout::kRepacked, 8},              // 4096 x 4096
    {90, "n_small/k_large", {16, 16, 16}, 9.90, GemvLayout::kRepacked, 8},            // 4096 x 14336
    {90, "n_mid/k_small", {16, 8, 4}, 4.34, GemvLayout::kRepacked, 8},                // 16384 x 1024
    {90, "n_mid/k_mid", {16, 8, 2}, 18.73, GemvLayout::kRepacked, 8},                 // 28672 x 4096
    {90, "n_mid/k_large", {16, 4, 4}, 37.41, GemvLayout::kRepacked, 8},               // 16384 x 16384
    {90, "n_large/k_small", {16, 4, 1}, 21.11, GemvLayout::kRepacked, 8},             // 131072 x 1024
    {90, "n_large/k_mid", {16, 8, 2}, 56.80, GemvLayout::kRepacked, 8},               // 151936 x 2560
    {90, "n_large/k_large", {16, 1, 1}, 108.73, GemvLayout::kRepacked, 8},            // 65536 x 12288
    {90, "exact/1024x4096", {16, 16, 16}, 3.53, GemvLayout::kRepacked, 8},            // Llama-3-8B k/v
    {90, "exact/6144x4096", {16, 16, 8}, 6.01, GemvLayout::kRepacked, 8},             // fused qkv
    {90, "exact/14336x4096", {16, 16, 4}, 10.88, GemvLayout::kRepacked, 8},           // gate / up
    {90, "exact/128256x4096", {16, 1, 1}, 71.96, GemvLayout::kRepacked, 8},           // lm_head
    // Early-weights launch (RepackedMatmulOptions::weights_read_early, used at <= 8 virtual rows;
    // keyed m_max 8 like the kernel they run, tuned at M = 1), same run. Only the classes where
    // that launch beat the ordinary entry by more than 2% back to back, plus the 4096 x 4096 one:
    // back to back it is 5% slower (4.51 against 4.28 us), but the tuner's decode check (8-layer
    // Llama-3-8B decode replay, A/B) measured the decode 1.48% faster with it [0.48, 1.74]; other
    // shapes precede it there, which the early loads overlap (docs/perf-cuda.md 45).
    {90, "n_small/k_small", {32, 4, 4}, 1.67, GemvLayout::kRepacked, 8, true},        // 4096 x 512
    {90, "n_small/k_mid", {16, 16, 16}, 4.51, GemvLayout::kRepacked, 8, true},        // 4096 x 4096
    {90, "n_small/k_large", {16, 16, 16}, 9.01, GemvLayout::kRepacked, 8, true},      // 4096 x 14336
    {90, "n_mid/k_small", {16, 4, 2}, 4.16, GemvLayout::kRepacked, 8, true},          // 16384 x 1024
    {90, "n_mid/k_mid", {16, 8, 4}, 17.91, GemvLayout::kRepacked, 8, true},           // 28672 x 4096
    {90, "n_large/k_small", {16, 16, 1}, 20.27, GemvLayout::kRepacked, 8, true},      // 131072 x 1024
    {90, "n_large/k_mid", {16, 2, 2}, 54.72, GemvLayout::kRepacked, 8, true},         // 151936 x 2560
    {90, "exact/1024x4096", {16, 16, 16}, 2.70, GemvLayout::kRepacked, 8, true},      // Llama-3-8B k/v
    {90, "exact/6144x4096", {16, 16, 8}, 5.53, GemvLayout::kRepacked, 8, true},       // fused qkv
    {90, "exact/14336x4096", {16, 16, 4}, 9.63, GemvLayout::kRepacked, 8, true},      // gate / up
    // Early-weights launch of the M = 9..16 kernel (16 rows per warp; docs/perf-cuda.md 33), same
    // run: the classes where it beat the ordinary entry by more than 2%.
    {90, "n_small/k_small", {16, 16, 4}, 2.93, GemvLayout::kRepacked, 16, true},      // 4096 x 512
    {90, "n_mid/k_small", {16, 8, 4}, 6.68, GemvLayout::kRepacked, 16, true},         // 16384 x 1024
    {90, "n_large/k_small", {16, 4, 1}, 33.56, GemvLayout::kRepacked, 16, true},      // 131072 x 1024
    {90, "exact/1024x4096", {16, 16, 16}, 4.20, GemvLayout::kRepacked, 16, true},     // Llama-3-8B k/v
    // M = 9..16 per launch (the NB = 2 kernel), ordinary launch, same run.
    {90, "n_small/k_small", no_overlap({16, 4, 4}), 3.15, GemvLayout::kRepacked, 16}, // 4096 x 512
    {90, "n_small/k_mid", {16, 16, 16}, 6.03, GemvLayout::kRepacked, 16},             // 4096 x 4096
    {90, "n_small/k_large", {16, 16, 16}, 13.11, GemvLayout::kRepacked, 16},          // 4096 x 14336
    {90, "n_mid/k_small", no_overlap({16, 4, 4}), 6.94, GemvLayout::kRepacked, 16},   // 16384 x 1024
    {90, "n_mid/k_mid", no_overlap({16, 4, 2}), 24.15, GemvLayout::kRepacked, 16},    // 28672 x 4096
    {90, "n_mid/k_large", {32, 4, 4}, 44.65, GemvLayout::kRepacked, 16},              // 16384 x 16384
    {90, "n_large/k_small", {16, 4, 1}, 34.38, GemvLayout::kRepacked, 16},            // 131072 x 1024
    {90, "n_large/k_mid", {16, 2, 2}, 80.31, GemvLayout::kRepacked, 16},              // 151936 x 2560
    {90, "n_large/k_large", no_overlap({32, 2, 1}), 144.10, GemvLayout::kRepacked, 16},// 65536 x 12288
    {90, "exact/1024x4096", no_overlap({16, 16, 16}), 4.41, GemvLayout::kRepacked, 16},// Llama-3-8B k/v
    {90, "exact/6144x4096", no_overlap({16, 8, 8}), 7.64, GemvLayout::kRepacked, 16}, // fused qkv
    {90, "exact/14336x4096", no_overlap({16, 4, 4}), 13.69, GemvLayout::kRepacked, 16},// gate / up
    {90, "exact/128256x4096", {32, 1, 1}, 95.46, GemvLayout::kRepacked, 16},          // lm_head
};

std::mutex g_mu;
bool g_user_loaded = false;
std::vector<GemvTableEntry> g_user;

void load_env_table_locked() {
  if (g_user_loaded) return;
  g_user_loaded = true;
  const char* path = std::getenv("NVFP4_CUDA_TUNING");
  if (!path || !*path) return;
  std::ifstream f(path);
  if (!f) fail("cuda tuning", std::string("cannot read NVFP4_CUDA_TUNING file '") + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  g_user = gemv_table_from_json(ss.str(), path);
}

const GemvTableEntry* find(const std::vector<GemvTableEntry>& t, int cc, const std::string& cls, GemvLayout layout,
                           int m_max, bool early) {
  for (const auto& e : t)
    if (e.cc == cc && e.layout == layout && e.m_max == m_max && e.early == early && e.cls == cls) return &e;
  return nullptr;
}

bool parse_exact(const std::string& cls, std::int64_t* n, std::int64_t* k) {
  if (cls.rfind("exact/", 0) != 0) return false;
  long long a = 0, b = 0;
  char tail = 0;
  if (std::sscanf(cls.c_str() + 6, "%lldx%lld%c", &a, &b, &tail) != 2 || a <= 0 || b <= 0) return false;
  if (gemv_exact_class(a, b) != cls) return false;  // canonical spelling only (no "+1", "01")
  *n = a;
  *k = b;
  return true;
}

// The tile of a table entry: the early-weights launch only with an entry tuned for it.
GemvTile tile_of(const GemvTableEntry& e) {
  GemvTile t = e.tile;
  t.early_ok = e.early;
  return t;
}

}  // namespace

const char* gemv_layout_name(GemvLayout l) { return l == GemvLayout::kRepacked ? "repacked" : "canonical"; }

std::string gemv_exact_class(std::int64_t n, std::int64_t k) {
  return "exact/" + std::to_string(n) + "x" + std::to_string(k);
}

bool gemv_class_known(const std::string& cls) {
  for (const char* b : kBuckets)
    if (cls == b) return true;
  std::int64_t n = 0, k = 0;
  return parse_exact(cls, &n, &k);
}

const GemvTableEntry* gemv_find_entry(const std::vector<GemvTableEntry>& table, int cc, std::int64_t n, std::int64_t k,
                                      GemvLayout layout, std::int64_t m, bool early) {
  const int mb = m <= 8 ? 8 : 16;
  // Class first, then launch: an exact class tuned without an early entry (the tuner found that
  // launch no faster there) keeps its ordinary entry rather than a bucket's early one.
  for (const std::string& cls : {gemv_exact_class(n, k), gemv_shape_class(n, k)})
    for (const bool ee : {true, false}) {
      if (ee && !early) continue;
      for (int mm : {mb, 0})
        if (const auto* e = find(table, cc, cls, layout, mm, ee)) return e;
    }
  return nullptr;
}

std::string gemv_shape_class(std::int64_t n, std::int64_t k) {
  const char* nb = n <= 6144 ? "n_small" : (n <= 32768 ? "n_mid" : "n_large");
  const char* kb = k <= 1024 ? "k_small" : (k <= 8192 ? "k_mid" : "k_large");
  return std::string(nb) + "/" + kb;
}

std::vector<std::string> gemv_shape_classes() {
  std::vector<std::string> out(std::begin(kBuckets), std::end(kBuckets));
  for (const auto& e : kExact) out.push_back(gemv_exact_class(e[0], e[1]));
  return out;
}

void gemv_class_representative(const std::string& cls, std::int64_t* n, std::int64_t* k) {
  // LLM-like shapes inside each bucket (hardware.md's table where one fits).
  struct R { const char* c; std::int64_t n, k; };
  static const R reps[] = {{"n_small/k_small", 4096, 512},    {"n_small/k_mid", 4096, 4096},
                           {"n_small/k_large", 4096, 14336},  {"n_mid/k_small", 16384, 1024},
                           {"n_mid/k_mid", 28672, 4096},      {"n_mid/k_large", 16384, 16384},
                           {"n_large/k_small", 131072, 1024}, {"n_large/k_mid", 151936, 2560},
                           {"n_large/k_large", 65536, 12288}};
  for (const auto& r : reps)
    if (cls == r.c) { *n = r.n; *k = r.k; return; }
  if (parse_exact(cls, n, k)) return;
  fail("cuda tuning", "unknown shape class '" + cls + "'");
}

bool gemv_tile_valid(const GemvTile& t) {
  return (t.cols_per_warp == 16 || t.cols_per_warp == 32) && t.warps_per_block >= 1 &&
         t.warps_per_block <= 16 && t.k_split >= 1 && t.warps_per_block % t.k_split == 0;
}

GemvTile gemv_lookup_tile(int cc, std::int64_t n, std::int64_t k, GemvLayout layout, std::int64_t m, bool early) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    load_env_table_locked();
    if (const auto* e = gemv_find_entry(g_user, cc, n, k, layout, m, early)) return tile_of(*e);
  }
  static const std::vector<GemvTableEntry> builtin = gemv_builtin_table();
  if (const auto* e = gemv_find_entry(builtin, cc, n, k, layout, m, early)) return tile_of(*e);
  // Rule of thumb for GPUs without an entry: split K more when there are few columns, so
  // every SM gets enough 16-byte loads in flight. At most 8 warps per block: the canonical M = 1
  // kernel's shared memory (~83 KB at 8 warps of 32 columns) then fits every GPU it runs on, the
  // 99 KB per block of sm_86 / sm_89 included (gemv_nvfp4_sm90.cu).
  GemvTile t;
  t.cols_per_warp = 32;
  const std::int64_t col_tiles = (n + 31) / 32;
  t.k_split = col_tiles >= 1024 ? 1 : (col_tiles >= 256 ? 4 : 8);
  if (t.k_split * 128 > k) t.k_split = 1;
  t.warps_per_block = t.k_split < 4 ? 4 : t.k_split;
  t.early_ok = false;  // never measured
  return t;
}

std::vector<GemvTableEntry> gemv_builtin_table() { return {std::begin(kBuiltin), std::end(kBuiltin)}; }

std::string gemv_table_to_json(const std::vector<GemvTableEntry>& entries, const std::string& comment) {
  nlohmann::json j;
  j["version"] = 1;
  j["comment"] = comment;
  j["entries"] = nlohmann::json::array();
  for (const auto& e : entries) {
    nlohmann::json o = {{"cc", e.cc},
                        {"layout", gemv_layout_name(e.layout)},
                        {"m_max", e.m_max},
                        {"class", e.cls},
                        {"cols_per_warp", e.tile.cols_per_warp},
                        {"warps_per_block", e.tile.warps_per_block},
                        {"k_split", e.tile.k_split},
                        {"overlap", e.tile.overlap_ok},
                        {"us", e.us}};
    if (e.early) o["launch"] = "early";
    j["entries"].push_back(o);
  }
  return j.dump(2) + "\n";
}

std::vector<GemvTableEntry> gemv_table_from_json(const std::string& text, const std::string& what) {
  const char* op = "cuda tuning";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail(op, "'" + what + "' is not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("entries") || !j["entries"].is_array())
    fail(op, "'" + what + "' has no \"entries\" array");
  std::vector<GemvTableEntry> out;
  int idx = 0;
  for (const auto& e : j["entries"]) {
    GemvTableEntry t;
    try {
      t.cc = e.at("cc").get<int>();
      t.cls = e.at("class").get<std::string>();
      t.tile.cols_per_warp = e.at("cols_per_warp").get<int>();
      t.tile.warps_per_block = e.at("warps_per_block").get<int>();
      t.tile.k_split = e.at("k_split").get<int>();
      if (e.contains("overlap")) t.tile.overlap_ok = e["overlap"].get<bool>();
      if (e.contains("us")) t.us = e["us"].get<double>();
      if (e.contains("m_max")) {
        t.m_max = e["m_max"].get<int>();
        if (t.m_max != 0 && t.m_max != 8 && t.m_max != 16)
          throw std::runtime_error("m_max " + std::to_string(t.m_max) + " is not 0, 8 or 16");
      }
      if (e.contains("layout")) {
        const std::string l = e["layout"].get<std::string>();
        if (l == "repacked") t.layout = GemvLayout::kRepacked;
        else if (l != "canonical") throw std::runtime_error("layout '" + l + "' is not canonical|repacked");
      }
      if (e.contains("launch")) {
        const std::string l = e["launch"].get<std::string>();
        if (l != "early" && l != "default") throw std::runtime_error("launch '" + l + "' is not early|default");
        t.early = l == "early";
        if (t.early && (t.layout != GemvLayout::kRepacked || t.m_max == 0))
          throw std::runtime_error("launch \"early\" needs layout repacked and m_max 8 or 16");
      }
    } catch (const std::exception& ex) {
      fail(op, "'" + what + "' entry " + std::to_string(idx) + ": " + ex.what());
    }
    if (!gemv_class_known(t.cls)) fail(op, "'" + what + "' entry " + std::to_string(idx) + ": unknown class '" + t.cls + "' (a bucket such as n_small/k_mid, or exact/NxK)");
    if (!gemv_tile_valid(t.tile))
      fail(op, "'" + what + "' entry " + std::to_string(idx) + " (" + t.cls + "): cols_per_warp=" +
                   std::to_string(t.tile.cols_per_warp) + " warps_per_block=" +
                   std::to_string(t.tile.warps_per_block) + " k_split=" + std::to_string(t.tile.k_split) +
                   " is not valid (cols_per_warp 16|32, warps 1..16, k_split divides warps)");
    out.push_back(t);
    ++idx;
  }
  return out;
}

void gemv_set_user_table(const std::vector<GemvTableEntry>& entries) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_user_loaded = true;
  g_user = entries;
}

void gemv_clear_user_table() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_user_loaded = true;
  g_user.clear();
}

}  // namespace nvfp4::cuda
