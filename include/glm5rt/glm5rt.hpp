// glm5rt.hpp - header-only C++17 RAII wrappers over the C ABI (glm5rt.h). Failures throw glm5rt::error
// carrying the status and glm5rt_last_error()'s message. Nothing here is compiled into the library, so
// it adds no C++ ABI: it only calls the C functions.
#ifndef GLM5RT_HPP
#define GLM5RT_HPP

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "glm5rt/glm5rt.h"

namespace glm5rt {

class error : public std::runtime_error {
 public:
  error(glm5rt_status status, const std::string& what) : std::runtime_error(what), status_(status) {}
  glm5rt_status status() const noexcept { return status_; }

 private:
  glm5rt_status status_;
};

inline void check(glm5rt_status status) {
  if (status != GLM5RT_OK)
    throw error(status, std::string(glm5rt_status_string(status)) + ": " + glm5rt_last_error());
}

// A move-only owner of a C handle with its free function.
template <typename T, void (*Free)(T*)>
class handle {
 public:
  handle() = default;
  explicit handle(T* p) noexcept : p_(p) {}
  handle(handle&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  handle& operator=(handle&& o) noexcept {
    if (this != &o) {
      Free(p_);
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  handle(const handle&) = delete;
  handle& operator=(const handle&) = delete;
  ~handle() { Free(p_); }
  T* get() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
};

class model {
 public:
  explicit model(const std::string& dir, const glm5rt_model_params* params = nullptr) {
    glm5rt_model* m = nullptr;
    check(glm5rt_model_load(dir.c_str(), params, &m));
    h_ = handle_t(m);
  }
  glm5rt_model_info info() const {
    glm5rt_model_info i{};
    i.struct_size = sizeof i;
    check(glm5rt_model_get_info(h_.get(), &i));
    return i;
  }
  glm5rt_model* get() const noexcept { return h_.get(); }

 private:
  using handle_t = handle<glm5rt_model, glm5rt_model_free>;
  handle_t h_;
};

class tokenizer {
 public:
  explicit tokenizer(const std::string& dir) {
    glm5rt_tokenizer* t = nullptr;
    check(glm5rt_tokenizer_load(dir.c_str(), &t));
    h_ = handle_t(t);
  }
  explicit tokenizer(const model& m) {
    glm5rt_tokenizer* t = nullptr;
    check(glm5rt_tokenizer_from_model(m.get(), &t));
    h_ = handle_t(t);
  }
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const {
    const uint32_t flags = parse_special ? uint32_t(GLM5RT_TOKENIZE_PARSE_SPECIAL) : 0u;
    size_t n = 0;
    check(glm5rt_tokenize(h_.get(), text.data(), text.size(), flags, nullptr, 0, &n));
    std::vector<int32_t> ids(n);
    check(glm5rt_tokenize(h_.get(), text.data(), text.size(), flags, ids.data(), ids.size(), &n));
    ids.resize(n);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const {
    const uint32_t flags = skip_special ? uint32_t(GLM5RT_DETOKENIZE_SKIP_SPECIAL) : 0u;
    size_t n = 0;
    check(glm5rt_detokenize(h_.get(), ids.data(), ids.size(), flags, nullptr, 0, &n));
    std::string s(n, '\0');
    check(glm5rt_detokenize(h_.get(), ids.data(), ids.size(), flags, s.data(), s.size(), &n));
    s.resize(n);
    return s;
  }
  bool is_eos(int32_t id) const { return glm5rt_tokenizer_is_eos(h_.get(), id) != 0; }
  glm5rt_tokenizer* get() const noexcept { return h_.get(); }

 private:
  using handle_t = handle<glm5rt_tokenizer, glm5rt_tokenizer_free>;
  handle_t h_;
};

class session {
 public:
  explicit session(const model& m, const glm5rt_session_params* params = nullptr) {
    glm5rt_session* s = nullptr;
    check(glm5rt_session_create(m.get(), params, &s));
    h_ = handle_t(s);
  }
  void append(const std::vector<int32_t>& ids) { check(glm5rt_session_append(h_.get(), ids.data(), ids.size(), nullptr)); }
  int32_t step(const glm5rt_sampler_params* sampler = nullptr) {
    int32_t t = -1;
    check(glm5rt_session_step(h_.get(), sampler, &t));
    return t;
  }
  int32_t sample(const glm5rt_sampler_params* sampler = nullptr) {
    int32_t t = -1;
    check(glm5rt_session_sample(h_.get(), sampler, &t));
    return t;
  }
  void reset() { check(glm5rt_session_reset(h_.get())); }
  void cancel() noexcept { glm5rt_session_cancel(h_.get()); }
  int64_t n_tokens() const noexcept { return glm5rt_session_n_tokens(h_.get()); }
  glm5rt_session* get() const noexcept { return h_.get(); }

 private:
  using handle_t = handle<glm5rt_session, glm5rt_session_free>;
  handle_t h_;
};

}  // namespace glm5rt

#endif  // GLM5RT_HPP
