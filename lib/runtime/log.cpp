#include "runtime/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace glm5rt {
namespace {

std::mutex g_sink_mutex;  // serializes the sink: callers get one line at a time
glm5rt_log_fn g_sink = nullptr;
void* g_sink_user_data = nullptr;
std::atomic<int32_t> g_level{GLM5RT_LOG_WARN};

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::error: return "error";
    case LogLevel::warn: return "warn";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
  }
  return "?";
}

}  // namespace

bool log_enabled(LogLevel level) { return static_cast<int32_t>(level) <= g_level.load(std::memory_order_relaxed); }

void log_line(LogLevel level, const std::string& line) {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  if (g_sink) {
    g_sink(static_cast<int32_t>(level), line.c_str(), g_sink_user_data);
  } else {
    std::fprintf(stderr, "glm5rt %s: %s\n", level_name(level), line.c_str());
  }
}

void set_log_sink(glm5rt_log_fn fn, void* user_data) {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  g_sink = fn;
  g_sink_user_data = user_data;
}

void set_log_level(int32_t level) { g_level.store(level, std::memory_order_relaxed); }

}  // namespace glm5rt
