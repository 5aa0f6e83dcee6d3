// Process-wide logging: whole lines with a level, delivered to the callback installed through the C ABI
// (or to stderr). Thread-safe; the sink is never called twice at once.
#pragma once

#include <sstream>
#include <string>

#include "glm5rt/glm5rt.h"

namespace glm5rt {

enum class LogLevel : int32_t { error = GLM5RT_LOG_ERROR, warn = GLM5RT_LOG_WARN, info = GLM5RT_LOG_INFO, debug = GLM5RT_LOG_DEBUG };

bool log_enabled(LogLevel level);
void log_line(LogLevel level, const std::string& line);
void set_log_sink(glm5rt_log_fn fn, void* user_data);
void set_log_level(int32_t level);

template <typename... Parts>
void log(LogLevel level, const Parts&... parts) {
  if (!log_enabled(level)) return;
  std::ostringstream os;
  (os << ... << parts);
  log_line(level, os.str());
}

}  // namespace glm5rt
