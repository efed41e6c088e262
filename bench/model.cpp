// bench/model.cpp -- model files (JSON) -> the linear layers a token runs through. See model.h.
#include "bench/model.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "io/file_util.h"
#include "io/json_util.h"
#include "nvfp4/error.h"

namespace nvfp4::bench {
namespace {

// Upper bounds far above any real model (the largest have ~130 layers, 2^18 vocabularies, 2^15
// hidden sizes) and low enough that every product the replay forms (N * K of a linear, layer
// counts times linears) stays far inside int64: a file with 10^9 layers used to build a
// 7 * 10^9-entry linear list (17 GB) before any check, and heads * head_dim could wrap to 0.
constexpr std::int64_t kMaxLayers = 1024;
constexpr std::int64_t kMaxDim = std::int64_t{1} << 22;

std::int64_t get_int(const nlohmann::json& j, const char* key, const std::string& src, bool required,
                     std::int64_t def = 0, std::int64_t max = kMaxDim) {
  if (!j.contains(key)) {
    if (required) fail("model", src + ": missing key \"" + key + "\"");
    return def;
  }
  const auto& v = j.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() <= 0)
    fail("model", src + ": \"" + key + "\" must be a positive integer, got " + io::json_excerpt(v));
  if (v.get<std::int64_t>() > max)
    fail("model", src + ": \"" + key + "\" = " + std::to_string(v.get<std::int64_t>()) + " exceeds " +
                      std::to_string(max) + " (far above any real model: a typo?)");
  return v.get<std::int64_t>();
}

std::string stem(const std::string& path) {
  std::string s = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  const auto dot = s.rfind(".json");
  return dot == std::string::npos ? s : s.substr(0, dot);
}

}  // namespace

ModelSpec parse_model_json(const std::string& text, const std::string& source) {
  nlohmann::json j = io::parse_json(text, "model", source);
  if (!j.is_object()) fail("model", source + ": expected a JSON object");
  // HF multimodal configs (Qwen3.5, ...) nest the language model under text_config.
  if (j.contains("text_config") && j["text_config"].is_object() && !j.contains("hidden_size")) {
    nlohmann::json t = j["text_config"];
    for (const char* k : {"name", "description", "tie_word_embeddings"})
      if (j.contains(k) && !t.contains(k)) t[k] = j[k];
    j = t;
  }
  ModelSpec m;
  m.source = source;
  m.name = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : stem(source);
  m.description = j.contains("description") && j["description"].is_string() ? j["description"].get<std::string>() : "";
  m.hidden = get_int(j, "hidden_size", source, true);
  m.intermediate = get_int(j, "intermediate_size", source, true);
  m.heads = get_int(j, "num_attention_heads", source, true);
  m.kv_heads = get_int(j, "num_key_value_heads", source, false, m.heads);
  m.layers = get_int(j, "num_hidden_layers", source, true, 0, kMaxLayers);
  m.vocab = get_int(j, "vocab_size", source, true);
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    m.head_dim = get_int(j, "head_dim", source, true);
  } else {
    if (m.hidden % m.heads != 0)
      fail("model", source + ": no head_dim and hidden_size=" + std::to_string(m.hidden) +
                        " is not a multiple of num_attention_heads=" + std::to_string(m.heads));
    m.head_dim = m.hidden / m.heads;
  }
  if (j.contains("tie_word_embeddings")) {
    if (!j["tie_word_embeddings"].is_boolean()) fail("model", source + ": \"tie_word_embeddings\" must be true or false");
    m.tied_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  for (auto [key, v] : {std::pair<const char*, std::int64_t>{"num_attention_heads*head_dim", m.heads * m.head_dim},
                        {"num_key_value_heads*head_dim", m.kv_heads * m.head_dim}})
    if (v > kMaxDim)  // each factor is <= 2^22, so the product is exact
      fail("model", source + ": " + key + " = " + std::to_string(v) + " exceeds " + std::to_string(kMaxDim));
  // NVFP4 blocks run along K: every K (hidden, heads*head_dim, intermediate) must be a multiple of 16.
  for (auto [key, v] : {std::pair<const char*, std::int64_t>{"hidden_size", m.hidden},
                        {"intermediate_size", m.intermediate},
                        {"num_attention_heads*head_dim", m.heads * m.head_dim}}) {
    if (v % 16 != 0)
      fail("model", source + ": " + key + "=" + std::to_string(v) + " is not a multiple of 16 (the NVFP4 block)");
  }
  return m;
}

std::vector<std::string> builtin_model_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : builtin_model_files()) names.push_back(name);
  return names;
}

ModelSpec load_model(const std::string& name_or_path) {
  for (const auto& [name, text] : builtin_model_files()) {
    if (name == name_or_path) {
      ModelSpec m = parse_model_json(text, "models/" + name + ".json");
      m.source = "builtin";
      return m;
    }
  }
  if (!io::path_exists(name_or_path)) {
    std::string list;
    for (const auto& n : builtin_model_names()) list += (list.empty() ? "" : ", ") + n;
    fail("model", "'" + name_or_path + "' is neither a built-in model (" + list + ") nor a readable JSON file");
  }
  // A regular file only (a FIFO would block the read forever, a folder is not JSON).
  return parse_model_json(io::read_text_file(name_or_path, "model"), name_or_path);
}

std::vector<Linear> model_linears(const ModelSpec& m, const LinearPlan& plan) {
  if (plan.layers < 0 || plan.layers > m.layers)
    fail("model", m.name + ": layers=" + std::to_string(plan.layers) + " outside [0, " + std::to_string(m.layers) + "]");
  if (!(plan.extra_work >= 0 && plan.extra_work <= 1))
    fail("model", "extra_work=" + std::to_string(plan.extra_work) + " outside [0, 1]");
  std::vector<Linear> out;
  const std::int64_t q = m.heads * m.head_dim, kv = m.kv_heads * m.head_dim;
  for (std::int64_t l = 0; l < plan.layers; ++l) {
    if (plan.fuse) {
      out.push_back({"qkv_proj", l, q + 2 * kv, m.hidden});
    } else {
      out.push_back({"q_proj", l, q, m.hidden});
      out.push_back({"k_proj", l, kv, m.hidden});
      out.push_back({"v_proj", l, kv, m.hidden});
    }
    out.push_back({"o_proj", l, m.hidden, q});
    if (plan.fuse) {
      out.push_back({"gate_up_proj", l, 2 * m.intermediate, m.hidden});
    } else {
      out.push_back({"gate_proj", l, m.intermediate, m.hidden});
      out.push_back({"up_proj", l, m.intermediate, m.hidden});
    }
    out.push_back({"down_proj", l, m.hidden, m.intermediate});
  }
  if (plan.lm_head) out.push_back({"lm_head", -1, m.vocab, m.hidden});
  if (plan.extra_work > 0) {
    const double params = linear_params(out);
    const auto n = std::max<std::int64_t>(1, std::llround(plan.extra_work * params / static_cast<double>(m.hidden)));
    out.push_back({"extra_work", -1, n, m.hidden});
  }
  if (out.empty()) fail("model", m.name + ": nothing to replay (layers=0 and no lm_head)");
  return out;
}

double linear_params(const std::vector<Linear>& ls, bool include_lm_head) {
  double p = 0;
  for (const auto& l : ls)
    if (include_lm_head || l.name != "lm_head") p += static_cast<double>(l.n) * static_cast<double>(l.k);
  return p;
}

}  // namespace nvfp4::bench
