// io/json_util.h -- internal: JSON parsing with a nesting limit, and bounded excerpts for error
// messages. Used by every reader of JSON the user hands in (safetensors headers, checkpoint
// index and config files, tuning tables, bench model files).
//
// Why a limit: nlohmann's parser is iterative, but dump(), copies and comparisons recurse, so a
// 400 KB safetensors header of 200 000 nested brackets overflowed the stack while its error
// message was being formatted (an audit on 2026-12-03). No file these readers accept nests
// deeper than a few levels.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

#include "nvfp4/error.h"

namespace nvfp4::io {

constexpr int kMaxJsonDepth = 64;

// The checks a DOM parse cannot make, in one pass over the events (nlohmann's SAX interface):
// nesting depth, and optionally duplicate keys (nlohmann keeps the last of them silently).
// Why not nlohmann's parser callback, which did both until 2026-12-03: with a callback, the DOM
// parser scans the enclosing object for discarded values after every nested object or array, so
// a header of n tensors took O(n^2): 40 000 / 100 000 tensors 48 / 537 s in `nvfp4 inspect`
// (dev VM; now 0.6 / 2.0 s). This pass and the plain DOM parse after it are both linear.
class JsonCheckingSax {
 public:
  using json = nlohmann::json;
  explicit JsonCheckingSax(bool track_keys) : track_keys_(track_keys) {}

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) {
    if (track_keys_) keys_.emplace_back();
    return open();
  }
  bool end_object() {
    if (track_keys_) keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) { return open(); }
  bool end_array() {
    --depth_;
    return true;
  }
  bool key(json::string_t& k) {
    if (track_keys_ && !keys_.back().insert(k).second && duplicate.empty()) duplicate = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception& e) {
    syntax_error = e.what();
    return false;
  }

  bool too_deep = false;
  std::string syntax_error;  // nlohmann's message, when the text is not JSON
  std::string duplicate;     // the first duplicate key, with track_keys

 private:
  bool open() {
    if (++depth_ > kMaxJsonDepth) too_deep = true;
    return !too_deep;  // false stops the parse
  }
  bool track_keys_;
  int depth_ = 0;
  std::vector<std::unordered_set<std::string>> keys_;  // the keys of every open object
};

// Parses `text`; throws Error(op) "<what> is not valid JSON (...)", "<what>: JSON nests deeper
// than 64 levels" or, with `duplicate_keys_are_errors` (the safetensors reader),
// "<what> has duplicate key 'k'".
inline nlohmann::json parse_json(const char* begin, const char* end, const char* op, const std::string& what,
                                 bool duplicate_keys_are_errors = false) {
  JsonCheckingSax check(duplicate_keys_are_errors);
  const bool ok = nlohmann::json::sax_parse(begin, end, &check);
  if (check.too_deep) fail(op, what + ": JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  if (!ok) fail(op, what + " is not valid JSON (" + check.syntax_error + ")");
  if (!check.duplicate.empty()) fail(op, what + " has duplicate key '" + check.duplicate + "'");
  try {
    return nlohmann::json::parse(begin, end);  // the text passed every check above: no callback needed
  } catch (const nlohmann::json::exception& e) {
    fail(op, what + " is not valid JSON (" + e.what() + ")");
  }
}

inline nlohmann::json parse_json(const std::string& text, const char* op, const std::string& what) {
  return parse_json(text.data(), text.data() + text.size(), op, what);
}

// At most `max_chars` of j's JSON text (then "..."), for messages that quote a bad value.
inline std::string json_excerpt(const nlohmann::json& j, std::size_t max_chars = 60) {
  std::string s = j.dump();
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

}  // namespace nvfp4::io
