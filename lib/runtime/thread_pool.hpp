// A small fixed pool of worker threads for data-parallel loops (matmuls, experts, attention heads).
// parallel_for splits [0, n) into contiguous chunks; the calling thread works too. Work items must be
// independent: every output element is computed by exactly one chunk with the same operations whatever
// the thread count, so results do not depend on n_threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace glm5rt {

class ThreadPool {
 public:
  // n_threads <= 0: all hardware threads.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over chunks covering [0, n); chunks hold at least min_chunk items (except the
  // last). Blocks until all chunks are done; rethrows the first exception a chunk threw.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one parallel_for at a time (sessions on several threads share a model)
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0, job_chunks_ = 0;
  int64_t next_chunk_ = 0;
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace glm5rt
