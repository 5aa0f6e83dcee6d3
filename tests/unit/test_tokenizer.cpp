// Tokenizer pieces on their own: UTF-8 replacement semantics (Rust's from_utf8_lossy), the regex
// dialect, BPE merging against a naive reference, merges formats, ignore_merges, added-token flags,
// normalizers / pre-tokenizers / decoders on small hand-made tokenizers, unsupported components, random
// bytes and random ids.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/error.hpp"
#include "support/tokenizer_json.hpp"
#include "tokenizer/bpe.hpp"
#include "tokenizer/detok_stream.hpp"
#include "tokenizer/regex.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

using glm5rt::Status;
using glm5rt::Tokenizer;
using nlohmann::json;
namespace utf8 = glm5rt::utf8;

namespace {

const std::string kGlmStyleDir = std::string(GLM5RT_TEST_DATA) + "/fixtures/tokenizers/glm-style";

std::shared_ptr<const Tokenizer> glm_style() {
  static auto t = Tokenizer::load_dir(kGlmStyleDir);
  return t;
}

// Expects fn() to throw glm5rt::Error with `status` and a message containing `needle`.
template <typename Fn>
void expect_error(Fn fn, Status status, const std::string& needle) {
  try {
    fn();
    FAIL("no error thrown; expected one mentioning ", needle);
  } catch (const glm5rt::Error& e) {
    CHECK(e.status() == status);
    CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

std::string fffd(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += utf8::kReplacement;
  return s;
}

// A fresh seed each run (printed); GLM5RT_TEST_SEED=N replays one.
std::mt19937_64 fresh_rng() {
  std::random_device rd;
  uint64_t seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  if (const char* env = std::getenv("GLM5RT_TEST_SEED")) seed = std::strtoull(env, nullptr, 10);
  MESSAGE("random seed ", seed);
  return std::mt19937_64(seed);
}

// Reference BPE: repeatedly merge the lowest-ranked adjacent pair, leftmost first. O(n^2), obviously
// correct, independent of the priority-queue implementation.
std::vector<std::string> naive_bpe(std::vector<std::string> syms, const std::map<std::pair<std::string, std::string>, int>& ranks) {
  while (true) {
    int best = -1, best_rank = 0;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      auto it = ranks.find({syms[i], syms[i + 1]});
      if (it != ranks.end() && (best < 0 || it->second < best_rank)) {
        best = static_cast<int>(i);
        best_rank = it->second;
      }
    }
    if (best < 0) return syms;
    syms[best] += syms[best + 1];
    syms.erase(syms.begin() + best + 1);
  }
}

}  // namespace

TEST_CASE("utf8::lossy matches String::from_utf8_lossy (maximal subparts)") {
  CHECK(utf8::lossy("abc") == "abc");
  CHECK(utf8::lossy("\xFF") == fffd(1));
  CHECK(utf8::lossy("\xF0\x90\x80" "a") == fffd(1) + "a");     // truncated 4-byte: one U+FFFD
  CHECK(utf8::lossy("\xE0\x80") == fffd(2));                    // 80 cannot follow E0
  CHECK(utf8::lossy("\xED\xA0\x80") == fffd(3));                // surrogate
  CHECK(utf8::lossy("\xC0\xAF") == fffd(2));                    // overlong
  CHECK(utf8::lossy("\xF4\x90\x80\x80") == fffd(4));            // above U+10FFFF
  CHECK(utf8::lossy("a\xE4\xB8") == "a" + fffd(1));
  CHECK(utf8::lossy("\xE4\xB8\xAD") == "\xE4\xB8\xAD");
  CHECK(utf8::incomplete_tail("a\xE4\xB8") == 2);
  CHECK(utf8::incomplete_tail("a\xE4") == 1);
  CHECK(utf8::incomplete_tail("\xE4\xB8\xAD") == 0);
  CHECK(utf8::incomplete_tail("\xE0\x80") == 0);  // already ill-formed, nothing can complete it
  CHECK(utf8::incomplete_tail("\xF0\x9F\x98") == 3);
}

TEST_CASE("regex dialect: \\s is Unicode White_Space as in Oniguruma, lookahead and (?i:) work") {
  glm5rt::Regex ws(R"(\s+)", false);
  CHECK(ws.find_all("\xE1\xA0\x8E").empty());    // U+180E is not White_Space (PCRE2's \s would match)
  CHECK(ws.find_all("\xE3\x80\x80").size() == 1);  // U+3000 is
  CHECK(ws.find_all("\xC2\x85").size() == 1);      // U+0085 is
  glm5rt::Regex trailing(R"(\s+(?!\S)|\s+)", false);
  const auto m = trailing.find_all("a   b");
  REQUIRE(m.size() == 2);  // "  " (leaves one space for " b"), then " "
  CHECK(m[0].start == 1);
  CHECK(m[0].end == 3);
  CHECK(m[1].end == 4);
  glm5rt::Regex ci(R"((?i:'s|'t))", false);
  CHECK(ci.find_all("IT'S").size() == 1);
  expect_error([] { glm5rt::Regex bad("(unclosed", false); }, Status::format, "(unclosed");
}

TEST_CASE("BPE on 300-character runs equals a naive quadratic reference") {
  auto tok = glm_style();
  const json j = json::parse(glm5rt::test::read_text(kGlmStyleDir + "/tokenizer.json"));
  std::map<std::pair<std::string, std::string>, int> ranks;
  int r = 0;
  for (const auto& m : j["model"]["merges"]) ranks.emplace(std::make_pair(m[0].get<std::string>(), m[1].get<std::string>()), r++);
  const auto& vocab = j["model"]["vocab"];
  // Pieces that the pre-tokenizer keeps whole: letters, spaces (\s+), punctuation.
  for (const std::string unit : {"a", "ab", " ", "-", "e", "xyz"}) {
    std::string run;
    while (run.size() < 300) run += unit;
    CAPTURE(unit);
    std::vector<int32_t> ids = tok->encode(run, false);
    // Each run is a single pre-tokenized word (letters, punctuation, or whitespace up to the end), all
    // ASCII, so the byte-level alphabet is the identity except ' ' -> 'Ġ'.
    std::vector<std::string> syms;
    for (char c : run) syms.push_back(c == ' ' ? "\xC4\xA0" : std::string(1, c));
    std::vector<int32_t> ref_ids;
    for (const auto& s : naive_bpe(syms, ranks)) ref_ids.push_back(vocab[s].get<int32_t>());
    CHECK(ids == ref_ids);
    CHECK(tok->decode(ids, false) == run);
  }
}

TEST_CASE("merges as \"a b\" strings give the same ids as merges as pairs") {
  json j = json::parse(glm5rt::test::read_text(kGlmStyleDir + "/tokenizer.json"));
  for (auto& m : j["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  auto legacy = Tokenizer::from_json(j.dump());
  auto tok = glm_style();
  for (const std::string text : {"Hello world", "I'm here, you're there", "中文测试 mixed", "   spaces   "}) {
    CAPTURE(text);
    CHECK(legacy->encode(text, true) == tok->encode(text, true));
  }
}

TEST_CASE("ignore_merges takes a whole word from the vocab before merging") {
  json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"bc", 3}, {"abc", 4}};
  json merges = json::array({json::array({"b", "c"})});
  json j = glm5rt::test::tiny_bpe_json(vocab, merges);
  auto plain = Tokenizer::from_json(j.dump());
  CHECK(plain->encode("abc", true) == std::vector<int32_t>{0, 3});
  j["model"]["ignore_merges"] = true;
  auto ignoring = Tokenizer::from_json(j.dump());
  CHECK(ignoring->encode("abc", true) == std::vector<int32_t>{4});
  CHECK(ignoring->encode("bcb", true) == std::vector<int32_t>{3, 1});
}

TEST_CASE("added tokens: longest first, special flag, lstrip / rstrip / single_word") {
  json vocab = {{"a", 0}, {"b", 1}, {" ", 2}, {"<", 3}, {">", 4}, {"x", 5}};
  json j = glm5rt::test::tiny_bpe_json(vocab, json::array());
  j["added_tokens"] = json::array({
      {{"id", 10}, {"content", "<x>"}, {"special", true}, {"lstrip", false}, {"rstrip", false}, {"single_word", false}, {"normalized", false}},
      {{"id", 11}, {"content", "<x>>"}, {"special", true}, {"lstrip", false}, {"rstrip", false}, {"single_word", false}, {"normalized", false}},
      {{"id", 12}, {"content", "ab"}, {"special", false}, {"lstrip", true}, {"rstrip", true}, {"single_word", false}, {"normalized", true}},
      {{"id", 13}, {"content", "xx"}, {"special", false}, {"lstrip", false}, {"rstrip", false}, {"single_word", true}, {"normalized", false}},
  });
  auto tok = Tokenizer::from_json(j.dump());
  CHECK(tok->encode("<x>>a", true) == std::vector<int32_t>{11, 0});              // longest at the position
  CHECK(tok->encode("<x>a", false) == std::vector<int32_t>{3, 5, 4, 0});          // special not parsed
  CHECK(tok->encode("a  ab  b", false) == std::vector<int32_t>{0, 12, 1});        // strips spaces both sides
  CHECK(tok->encode("xx a", true) == std::vector<int32_t>{13, 2, 0});             // a whole word
  CHECK(tok->encode("axx", true) == std::vector<int32_t>{0, 5, 5});               // inside a word: not matched
  CHECK(tok->vocab_size() == 14);
  CHECK(tok->decode(std::vector<int32_t>{11, 0}, true) == "a");                    // skip special
  CHECK(tok->decode(std::vector<int32_t>{12, 0}, true) == "ab a");                 // no decoder: joined by spaces
}

TEST_CASE("normalizers, Metaspace, Digits and decoders on a small tokenizer") {
  // A sentencepiece-like setup: NFKC + Lowercase + Replace, Metaspace with prepend "first",
  // byte fallback, and the usual decoder chain.
  json vocab = {{"\xE2\x96\x81", 0}, {"f", 1}, {"i", 2}, {"\xE2\x96\x81" "fi", 3}, {"1", 4}, {"2", 5}, {"x", 6}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 100 + b;
  }
  json merges = json::array({json::array({"\xE2\x96\x81", "f"}), json::array({"\xE2\x96\x81" "f", "i"})});
  vocab["\xE2\x96\x81" "f"] = 7;
  json j = glm5rt::test::tiny_bpe_json(vocab, merges);
  j["model"]["byte_fallback"] = true;
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", json::array({{{"type", "NFKC"}},
                                                  {{"type", "Lowercase"}},
                                                  {{"type", "Replace"}, {"pattern", {{"String", "y"}}}, {"content", "x"}}})}};
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", json::array({{{"type", "Digits"}, {"individual_digits", true}},
                                                       {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"}, {"split", true}}})}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                                            {{"type", "ByteFallback"}},
                                            {{"type", "Fuse"}},
                                            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  auto tok = Tokenizer::from_json(j.dump());
  // U+FB01 (ﬁ ligature) -> "fi" by NFKC; "FI" -> "fi" by Lowercase; "y" -> "x" by Replace.
  CHECK(tok->encode("\xEF\xAC\x81", true) == std::vector<int32_t>{3});
  CHECK(tok->encode("FI", true) == std::vector<int32_t>{3});
  CHECK(tok->encode("12", true) == std::vector<int32_t>{0, 4, 5});
  CHECK(tok->encode("y", true) == std::vector<int32_t>{0, 6});
  // "é" is not in the vocab: byte fallback to <0xC3><0xA9>.
  const auto ids = tok->encode("\xC3\xA9", true);
  CHECK(ids == std::vector<int32_t>{0, 100 + 0xC3, 100 + 0xA9});
  CHECK(tok->decode(ids, false) == "\xC3\xA9");
  // A lone byte token that is not UTF-8 decodes to one U+FFFD per byte (HF ByteFallback).
  CHECK(tok->decode(std::vector<int32_t>{3, 100 + 0xC3}, false) == "fi" + fffd(1));
  // Streaming: the fallback bytes are held until the character is complete.
  glm5rt::DetokStream stream(tok);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    CHECK(utf8::is_valid(piece));
    CHECK(piece.find(utf8::kReplacement) == std::string::npos);
    streamed += piece;
  }
  streamed += stream.flush();
  CHECK(streamed == "\xC3\xA9");
}

TEST_CASE("Lowercase is Rust's per-character mapping (no final-sigma rule)") {
  json vocab = json::object();
  json j = glm5rt::test::tiny_bpe_json(vocab, json::array());
  // Use the normalizer through a tokenizer with a vocab of the expected characters.
  j["model"]["vocab"] = {{"\xCF\x83", 0}, {"i", 1}, {"\xCC\x87", 2}};  // σ, i, combining dot above
  j["normalizer"] = {{"type", "Lowercase"}};
  auto tok = Tokenizer::from_json(j.dump());
  CHECK(tok->encode("\xCE\xA3\xCE\xA3", true) == std::vector<int32_t>{0, 0});  // ΣΣ -> σσ (not σς)
  CHECK(tok->encode("\xC4\xB0", true) == std::vector<int32_t>{1, 2});          // İ -> i + U+0307
}

TEST_CASE("an unsupported component fails to load with a message naming it") {
  const json base = json::parse(glm5rt::test::read_text(kGlmStyleDir + "/tokenizer.json"));
  struct Bad {
    const char* key;
    json value;
    const char* name;
  };
  const std::vector<Bad> bads = {
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}, "BertPreTokenizer"},
      {"normalizer", {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}}, "Precompiled"},
      {"decoder", {{"type", "CTC"}}, "CTC"},
      {"post_processor", {{"type", "SomethingNew"}}, "SomethingNew"},
  };
  for (const auto& b : bads) {
    json j = base;
    j[b.key] = b.value;
    CAPTURE(b.name);
    expect_error([&] { Tokenizer::from_json(j.dump()); }, Status::unsupported, b.name);
  }
  json wp = base;
  wp["model"]["type"] = "WordPiece";
  expect_error([&] { Tokenizer::from_json(wp.dump()); }, Status::unsupported, "WordPiece");
  json nested = base;
  nested["pre_tokenizer"]["pretokenizers"].push_back({{"type", "Punctuation"}});
  expect_error([&] { Tokenizer::from_json(nested.dump()); }, Status::unsupported, "Punctuation");
  json split = base;
  split["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  expect_error([&] { Tokenizer::from_json(split.dump()); }, Status::unsupported, "Sideways");
  json dropout = base;
  dropout["model"]["dropout"] = 0.1;
  expect_error([&] { Tokenizer::from_json(dropout.dump()); }, Status::unsupported, "dropout");
  json trunc = base;
  trunc["truncation"] = {{"max_length", 8}};
  expect_error([&] { Tokenizer::from_json(trunc.dump()); }, Status::unsupported, "truncation");
  json missing = base;
  missing["model"]["merges"].push_back(json::array({"nope-left", "nope-right"}));
  expect_error([&] { Tokenizer::from_json(missing.dump()); }, Status::format, "nope-left");
  expect_error([&] { Tokenizer::from_json("{not json"); }, Status::format, "not valid JSON");
  expect_error([&] { Tokenizer::load_dir("/nonexistent/dir"); }, Status::io, "tokenizer.json");
}

TEST_CASE("invalid UTF-8 input is an invalid_argument error naming the offset") {
  auto tok = glm_style();
  expect_error([&] { tok->encode(std::string("ab\xFF" "c"), true); }, Status::invalid_argument, "offset 2");
  expect_error([&] { tok->encode(std::string("\xED\xA0\x80"), true); }, Status::invalid_argument, "not valid UTF-8");
}

TEST_CASE("random byte strings: valid ones round-trip, invalid ones are refused, nothing crashes") {
  auto tok = glm_style();
  auto rng = fresh_rng();
  int valid = 0, invalid = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    const size_t len = rng() % 64;
    std::string s;
    if (iter % 2 == 0) {
      // Valid by construction: random code points from every plane (surrogates excluded).
      for (size_t k = 0; k < len; ++k) {
        const uint64_t r = rng();
        char32_t cp = (r & 3) == 0 ? 0x20 + (r >> 8) % 0x5F : (r & 3) == 1 ? 0x80 + (r >> 8) % 0x780
                    : (r & 3) == 2 ? 0x800 + (r >> 8) % 0xF800 : 0x10000 + (r >> 8) % 0x100000;
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
        utf8::append(s, cp);
      }
    } else {
      // Random bytes: ASCII, continuation and lead bytes mixed, so most strings are ill-formed.
      s.resize(len);
      for (auto& c : s) {
        const uint64_t r = rng();
        c = static_cast<char>((r & 3) == 0 ? r >> 8 : (r & 3) == 1 ? 0x80 + ((r >> 8) & 0x3F) : (r & 3) == 2 ? 0xC2 + ((r >> 8) % 0x33) : 0x20 + ((r >> 8) % 0x5F));
      }
    }
    if (utf8::is_valid(s)) {
      ++valid;
      const auto ids = tok->encode(s, false);
      CHECK(tok->decode(ids, false) == s);  // byte-level BPE without a normalizer is lossless
    } else {
      ++invalid;
      try {
        tok->encode(s, false);
        FAIL("invalid UTF-8 was accepted");
      } catch (const glm5rt::Error& e) {
        CHECK(e.status() == Status::invalid_argument);
      }
    }
  }
  CHECK(valid >= 1000);
  CHECK(invalid > 500);
}

TEST_CASE("random ids: decode gives valid UTF-8, streaming equals full decode, pieces are whole characters") {
  auto rng = fresh_rng();
  // Byte-level BPE, and two HF-made component tokenizers whose decoders are stateful across tokens
  // (ByteFallback groups, Strip / Metaspace on the first token).
  const std::string comp = std::string(GLM5RT_TEST_DATA) + "/tokenizer_components/";
  for (const std::string dir : {kGlmStyleDir, comp + "sentencepiece-like", comp + "metaspace-digits"}) {
    auto tok = Tokenizer::load_dir(dir);
    CAPTURE(dir);
    for (int iter = 0; iter < 300; ++iter) {
      std::vector<int32_t> ids(rng() % 40);
      for (auto& id : ids) id = static_cast<int32_t>(rng() % tok->vocab_size());
      const std::string full = tok->decode(ids, false);
      CHECK(utf8::is_valid(full));
      glm5rt::DetokStream stream(tok);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string piece = stream.push(id);
        CHECK(utf8::is_valid(piece));
        streamed += piece;
      }
      streamed += stream.flush();
      CHECK(streamed == full);
    }
    expect_error([&] { tok->decode(std::vector<int32_t>{-1}, false); }, Status::invalid_argument, "-1");
    expect_error([&] { tok->decode(std::vector<int32_t>{tok->vocab_size()}, false); }, Status::invalid_argument, "outside");
  }
}

TEST_CASE("utf8::decode and utf8::append round-trip every scalar value") {
  std::string s;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    s.clear();
    utf8::append(s, cp);
    REQUIRE(utf8::valid_sequence_length(s, 0) == s.size());
    size_t i = 0;
    REQUIRE(utf8::decode(s, i) == cp);
    REQUIRE(i == s.size());
  }
}

TEST_CASE("streaming holds back an incomplete character until it completes") {
  auto tok = glm_style();
  // "中" is E4 B8 AD; in the byte-level alphabet each byte is its own token.
  const auto ids = tok->encode("\xE4\xB8\xAD", false);
  REQUIRE(ids.size() >= 2);
  glm5rt::DetokStream stream(tok);
  std::string out;
  for (size_t i = 0; i + 1 < ids.size(); ++i) CHECK(stream.push(ids[i]).empty());
  out += stream.push(ids.back());
  CHECK(out == "\xE4\xB8\xAD");
  // An incomplete tail at the end becomes U+FFFD on flush, as the full decode gives.
  glm5rt::DetokStream partial(tok);
  CHECK(partial.push(ids[0]).empty());
  CHECK(partial.flush() == tok->decode(std::vector<int32_t>{ids[0]}, false));
}

TEST_CASE("one tokenizer shared by threads gives the same ids as one thread") {
  auto tok = glm_style();
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i)
    texts.push_back("thread text " + std::to_string(i * 7919) + " \xE4\xB8\xAD\xE6\x96\x87 words words " + std::string(i, 'x'));
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(tok->encode(t, true));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (int round = 0; round < 20; ++round)
        for (size_t i = 0; i < texts.size(); ++i)
          if (tok->encode(texts[(i + w * 13) % texts.size()], true) != expected[(i + w * 13) % texts.size()]) ++mismatches[w];
    });
  for (auto& t : threads) t.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

TEST_CASE("mutated tokenizer.json: loads, or fails with a glm5rt::Error, never another exception or a crash") {
  const std::string comp = std::string(GLM5RT_TEST_DATA) + "/tokenizer_components/";
  auto rng = fresh_rng();
  const std::vector<json> replacements = {nullptr, 0, -1, 1e30, "x", "", json::array(), json::object(), true,
                                          json::array({"a"}), json::object({{"type", "Nope"}})};
  int loaded = 0, refused = 0;
  for (const std::string name : {"bytelevel-gpt2", "sentencepiece-like", "metaspace-digits", "subword-prefix"}) {
    const json base = json::parse(glm5rt::test::read_text(comp + name + "/tokenizer.json"));
    // Candidate paths: every leaf and inner node outside the big vocab/merges, plus a few inside them.
    std::vector<std::string> paths;
    const json flat = base.flatten();
    for (auto it = flat.begin(); it != flat.end(); ++it) {
      const std::string& p = it.key();
      const bool bulk = p.rfind("/model/vocab/", 0) == 0 || p.rfind("/model/merges/", 0) == 0;
      if (!bulk || rng() % 200 == 0) {
        paths.push_back(p);
        // Its parents too, so whole objects get replaced.
        for (size_t k = p.rfind('/'); k != std::string::npos && k > 0; k = p.rfind('/', k - 1)) paths.push_back(p.substr(0, k));
      }
    }
    for (int iter = 0; iter < 150; ++iter) {
      json j = base;
      const std::string path = paths[rng() % paths.size()];
      j[json::json_pointer(path)] = replacements[rng() % replacements.size()];
      CAPTURE(name);
      CAPTURE(path);
      try {
        auto tok = Tokenizer::from_json(j.dump());
        ++loaded;
        // Whatever loaded must also encode and decode without crashing.
        const auto ids = tok->encode("Hello <mask> world 123 \xC3\xA9", true);
        tok->decode(ids, false);
      } catch (const glm5rt::Error&) {
        ++refused;
      } catch (const std::exception& e) {
        FAIL("a non-glm5rt exception escaped: ", e.what());
      }
    }
  }
  MESSAGE(loaded, " mutated tokenizers loaded, ", refused, " refused with an error");
  CHECK(refused > 0);
}

TEST_CASE("streaming with skipped special tokens: long runs of them keep the equality and a short window") {
  auto tok = glm_style();
  const int32_t special = *tok->added_token_id("<|user|>");
  std::vector<int32_t> ids = tok->encode("Hello world", false);
  for (int i = 0; i < 500; ++i) ids.push_back(special);
  for (int32_t id : tok->encode(" and \xE4\xB8\xAD more", false)) ids.push_back(id);
  for (bool skip : {false, true}) {
    glm5rt::DetokStream stream(tok, skip);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    CHECK(streamed == tok->decode(ids, skip));
  }
}
