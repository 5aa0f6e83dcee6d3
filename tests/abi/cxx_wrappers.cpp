// The header compiles as C++ (with -pedantic -Werror) and the RAII wrappers turn failures into
// exceptions that carry the status and the message.
#include <glm5rt/glm5rt.hpp>

#include <cstdio>
#include <cstring>

int main() {
  int failures = 0;
  try {
    glm5rt::model m("/nonexistent/model/dir");
    std::fprintf(stderr, "loading a missing directory succeeded\n");
    ++failures;
  } catch (const glm5rt::error& e) {
    if (e.status() == GLM5RT_OK || std::strlen(e.what()) == 0) ++failures;
  }
  if (failures) return 1;
  std::printf("C++ wrapper checks passed\n");
  return 0;
}
