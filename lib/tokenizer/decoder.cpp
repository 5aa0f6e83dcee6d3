#include "tokenizer/decoder.hpp"

#include "tokenizer/byte_level.hpp"
#include "tokenizer/json_fields.hpp"
#include "tokenizer/regex.hpp"
#include "tokenizer/utf8.hpp"

namespace glm5rt {
namespace {

using tokjson::json;

class ByteLevel final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    const auto& map = byte_level::table().char_to_byte;
    std::string bytes;
    for (const auto& t : tokens) {
      // A token whose every character is in the byte table becomes those bytes; any other token (an
      // added token with characters outside the table) passes through as its own UTF-8.
      std::string mapped;
      mapped.reserve(t.size());
      bool all = utf8::is_valid(t);
      for (size_t i = 0; all && i < t.size();) {
        auto it = map.find(utf8::decode(t, i));
        if (it == map.end()) all = false;
        else mapped.push_back(static_cast<char>(it->second));
      }
      bytes += all ? mapped : t;
    }
    return {std::move(bytes)};
  }
};

class Replace final : public Decoder {
 public:
  Replace(std::string pattern, bool is_regex, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {
    if (is_regex) regex_ = std::make_unique<Regex>(pattern_, false);
  }
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (auto& t : tokens) {
      if (regex_) {
        // The regex engine needs valid UTF-8; invalid bytes were going to become U+FFFD anyway.
        const std::string text = utf8::is_valid(t) ? t : utf8::lossy(t);
        std::string out;
        size_t last = 0;
        for (const auto& m : regex_->find_all(text)) {
          if (m.end == m.start) continue;
          out.append(text, last, m.start - last);
          out += content_;
          last = m.end;
        }
        out.append(text, last, std::string::npos);
        t = std::move(out);
      } else if (!pattern_.empty()) {
        std::string out;
        size_t last = 0, pos;
        while ((pos = t.find(pattern_, last)) != std::string::npos) {
          out.append(t, last, pos - last);
          out += content_;
          last = pos + pattern_.size();
        }
        out.append(t, last, std::string::npos);
        t = std::move(out);
      }
    }
    return tokens;
  }

 private:
  std::string pattern_, content_;
  std::unique_ptr<Regex> regex_;
};

class Fuse final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    return {std::move(all)};
  }
};

class Strip final : public Decoder {
 public:
  Strip(std::string content, size_t start, size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    if (content_.empty()) return tokens;
    for (auto& t : tokens) {
      size_t begin = 0, end = t.size();
      for (size_t k = 0; k < start_ && t.compare(begin, content_.size(), content_) == 0 && begin < end; ++k)
        begin += content_.size();
      for (size_t k = 0; k < stop_ && end >= begin + content_.size() &&
                         t.compare(end - content_.size(), content_.size(), content_) == 0;
           ++k)
        end -= content_.size();
      t = t.substr(begin, end - begin);
    }
    return tokens;
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class ByteFallback final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    size_t pending_count = 0;
    auto flush = [&] {
      if (pending_count == 0) return;
      if (utf8::is_valid(pending)) out.push_back(pending);
      else
        for (size_t k = 0; k < pending_count; ++k) out.emplace_back(utf8::kReplacement);
      pending.clear();
      pending_count = 0;
    };
    for (auto& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        auto hex = [](char c) {
          if (c >= '0' && c <= '9') return c - '0';
          if (c >= 'A' && c <= 'F') return c - 'A' + 10;
          if (c >= 'a' && c <= 'f') return c - 'a' + 10;
          return -1;
        };
        const int hi = hex(t[3]), lo = hex(t[4]);
        if (hi >= 0 && lo >= 0) byte = hi * 16 + lo;
      }
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
        ++pending_count;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    return out;
  }
};

class Metaspace final : public Decoder {
 public:
  Metaspace(std::string replacement, bool strip_first) : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      size_t last = 0, pos;
      while ((pos = t.find(replacement_, last)) != std::string::npos) {
        out.append(t, last, pos - last);
        out.push_back(' ');
        last = pos + replacement_.size();
      }
      out.append(t, last, std::string::npos);
      if (i == 0 && strip_first_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
      tokens[i] = std::move(out);
    }
    return tokens;
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (const auto& p : parts_) tokens = p->decode_chain(std::move(tokens));
    return tokens;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = tokjson::type_of(j, "decoder");
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "Replace") {
    bool is_regex = false;
    std::string pattern = tokjson::pattern_of(j, "decoder Replace", is_regex);
    return std::make_unique<Replace>(std::move(pattern), is_regex, tokjson::get_string(j, "content", "decoder Replace"));
  }
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip") {
    const std::string content = tokjson::get_string(j, "content", "decoder Strip");
    auto count = [&](const char* key) -> size_t {
      auto it = j.find(key);
      return (it != j.end() && it->is_number_unsigned()) ? it->get<size_t>() : 0;
    };
    return std::make_unique<Strip>(content, count("start"), count("stop"));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Metaspace") {
    const std::string replacement = tokjson::string_or(j, "replacement", "\xE2\x96\x81");
    bool strip_first = tokjson::bool_or(j, "add_prefix_space", true);
    if (auto it = j.find("prepend_scheme"); it != j.end() && it->is_string())
      strip_first = it->get<std::string>() != "never";
    return std::make_unique<Metaspace>(replacement, strip_first);
  }
  if (type == "Sequence") {
    const json& list = tokjson::field(j, "decoders", "decoder Sequence");
    require(list.is_array(), Status::format, "tokenizer.json: decoder Sequence.decoders must be an array");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const json& item : list) {
      auto d = make_decoder(item);
      if (d) parts.push_back(std::move(d));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  fail(Status::unsupported, "tokenizer.json: unsupported decoder type \"", type,
       "\" (supported: ByteLevel, Replace, Fuse, Strip, ByteFallback, Metaspace, Sequence)");
}

}  // namespace glm5rt
