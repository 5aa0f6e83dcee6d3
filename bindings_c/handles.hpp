// The C handles: each opaque glm5rt_* struct owns (a share of) one core object. Only bindings_c/ sees
// these definitions. shared_ptr everywhere: sessions and tokenizers keep their model alive, so the free
// order of handles never matters.
#pragma once

#include <memory>

#include "glm5rt/glm5rt.h"

namespace glm5rt {
class Model;
class Session;
class Tokenizer;
class DetokStream;
}  // namespace glm5rt

struct glm5rt_model {
  std::shared_ptr<glm5rt::Model> impl;
};
struct glm5rt_tokenizer {
  std::shared_ptr<const glm5rt::Tokenizer> impl;
};
struct glm5rt_session {
  std::shared_ptr<glm5rt::Session> impl;
};
struct glm5rt_detok_stream {
  std::shared_ptr<glm5rt::DetokStream> impl;
};
