// Small helpers for reading tokenizer.json: every missing or mistyped field is a FORMAT error that names
// the component and the field, never an exception from nlohmann that says only "type must be string".
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "runtime/error.hpp"

namespace glm5rt::tokjson {

using json = nlohmann::json;

inline const json& field(const json& j, const char* key, const char* component) {
  require(j.is_object(), Status::format, "tokenizer.json: ", component, " is not an object");
  auto it = j.find(key);
  require(it != j.end(), Status::format, "tokenizer.json: ", component, " lacks field \"", key, "\"");
  return *it;
}

inline std::string get_string(const json& j, const char* key, const char* component) {
  const json& v = field(j, key, component);
  require(v.is_string(), Status::format, "tokenizer.json: ", component, ".", key, " must be a string");
  return v.get<std::string>();
}

inline std::string string_or(const json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  return (it != j.end() && it->is_string()) ? it->get<std::string>() : fallback;
}

inline bool bool_or(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return (it != j.end() && it->is_boolean()) ? it->get<bool>() : fallback;
}

inline std::string type_of(const json& j, const char* component) {
  return get_string(j, "type", component);
}

// {"String": "..."} or {"Regex": "..."} (Split, Replace): returns the text and whether it is a regex.
inline std::string pattern_of(const json& j, const char* component, bool& is_regex) {
  const json& p = field(j, "pattern", component);
  require(p.is_object(), Status::format, "tokenizer.json: ", component, ".pattern must be an object");
  if (auto it = p.find("Regex"); it != p.end() && it->is_string()) {
    is_regex = true;
    return it->get<std::string>();
  }
  if (auto it = p.find("String"); it != p.end() && it->is_string()) {
    is_regex = false;
    return it->get<std::string>();
  }
  fail(Status::format, "tokenizer.json: ", component, ".pattern must hold \"String\" or \"Regex\"");
}

}  // namespace glm5rt::tokjson
