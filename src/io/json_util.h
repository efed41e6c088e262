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

#include "nvfp4/error.h"

namespace nvfp4::io {

constexpr int kMaxJsonDepth = 64;

// Parses `text`; throws Error(op) "<what> is not valid JSON (...)" or "<what>: JSON nests deeper
// than 64 levels". `also`, when given, sees every parse event after the depth check (the
// safetensors reader tracks duplicate keys with it).
inline nlohmann::json parse_json(const char* begin, const char* end, const char* op, const std::string& what,
                                 const nlohmann::json::parser_callback_t& also = nullptr) {
  struct TooDeep {};
  const nlohmann::json::parser_callback_t cb = [&](int depth, nlohmann::json::parse_event_t ev,
                                                   nlohmann::json& parsed) {
    if (depth > kMaxJsonDepth) throw TooDeep{};
    return also ? also(depth, ev, parsed) : true;
  };
  try {
    return nlohmann::json::parse(begin, end, cb, /*allow_exceptions=*/true);
  } catch (const TooDeep&) {
    fail(op, what + ": JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  } catch (const nlohmann::json::exception& e) {
    fail(op, what + " is not valid JSON (" + e.what() + ")");
  }
}

inline nlohmann::json parse_json(const std::string& text, const char* op, const std::string& what,
                                 const nlohmann::json::parser_callback_t& also = nullptr) {
  return parse_json(text.data(), text.data() + text.size(), op, what, also);
}

// At most `max_chars` of j's JSON text (then "..."), for messages that quote a bad value.
inline std::string json_excerpt(const nlohmann::json& j, std::size_t max_chars = 60) {
  std::string s = j.dump();
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

}  // namespace nvfp4::io
