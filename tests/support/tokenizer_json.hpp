// Builders for small tokenizer.json documents in tests: a tiny BPE model plus whatever components a test
// wants to exercise.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace glm5rt::test {

inline nlohmann::json tiny_bpe_json(nlohmann::json vocab, nlohmann::json merges) {
  return nlohmann::json{{"version", "1.0"},          {"truncation", nullptr},  {"padding", nullptr},
                        {"added_tokens", nlohmann::json::array()}, {"normalizer", nullptr},
                        {"pre_tokenizer", nullptr},  {"post_processor", nullptr}, {"decoder", nullptr},
                        {"model",
                         {{"type", "BPE"},
                          {"dropout", nullptr},
                          {"unk_token", nullptr},
                          {"continuing_subword_prefix", nullptr},
                          {"end_of_word_suffix", nullptr},
                          {"fuse_unk", false},
                          {"byte_fallback", false},
                          {"ignore_merges", false},
                          {"vocab", std::move(vocab)},
                          {"merges", std::move(merges)}}}};
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace glm5rt::test
