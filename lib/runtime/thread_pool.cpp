#include "runtime/thread_pool.hpp"

#include <algorithm>

namespace glm5rt {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    // Take chunks until none is left (dynamic claiming is fine: a chunk's result does not depend on
    // which thread computes it).
    while (next_chunk_ < job_chunks_) {
      const int64_t c = next_chunk_++;
      const auto* fn = job_;
      const int64_t b = c * job_chunk_, e = std::min(job_n_, b + job_chunk_);
      lock.unlock();
      std::exception_ptr err;
      try {
        (*fn)(b, e);
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      if (err && !error_) error_ = err;
    }
    if (--pending_ == 0) done_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int64_t threads = size();
  int64_t chunk = std::max(min_chunk, (n + threads * 4 - 1) / (threads * 4));
  if (workers_.empty() || n <= min_chunk) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call(call_mutex_);
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  job_chunks_ = (n + chunk - 1) / chunk;
  next_chunk_ = 0;
  pending_ = static_cast<int>(workers_.size());
  error_ = nullptr;
  ++generation_;
  wake_.notify_all();
  while (next_chunk_ < job_chunks_) {
    const int64_t c = next_chunk_++;
    const int64_t b = c * chunk, e = std::min(n, b + chunk);
    lock.unlock();
    std::exception_ptr err;
    try {
      fn(b, e);
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    if (err && !error_) error_ = err;
  }
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  if (error_) {
    auto e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace glm5rt
