#include "backend/backend.hpp"

#include "runtime/error.hpp"

namespace glm5rt {

void BatchPlan::add_sequence(CacheStorage* cache, std::vector<int32_t> block_table, int32_t page_size,
                             int64_t n_past, const int32_t* toks, int64_t n_new) {
  SequencePlan s;
  s.cache = cache;
  s.n_past = n_past;
  s.n_new = n_new;
  s.first_row = n_rows();
  const int32_t index = static_cast<int32_t>(seqs.size());
  for (int64_t i = 0; i < n_new; ++i) {
    const int64_t pos = n_past + i;
    tokens.push_back(toks[i]);
    positions.push_back(pos);
    seq_of_row.push_back(index);
    slots.push_back(static_cast<int64_t>(block_table[pos / page_size]) * page_size + pos % page_size);
  }
  s.block_table = std::move(block_table);
  seqs.push_back(std::move(s));
}

int64_t Backend::record_floats_per_token() const {
  const ModelConfig& c = config();
  return c.num_hidden_layers * (c.kv_lora_rank + c.qk_rope_head_dim + c.index_head_dim);
}

std::unique_ptr<LogitsRow> Backend::create_logits_row() {
  fail(Status::internal, "the ", name(), " backend keeps no logits in device memory");
}
void Backend::read_logits(const LogitsRow&, float*) const {
  fail(Status::internal, "the ", name(), " backend keeps no logits in device memory");
}
void Backend::copy_logits(const LogitsRow&, LogitsRow&) const {
  fail(Status::internal, "the ", name(), " backend keeps no logits in device memory");
}
void Backend::sample_logits(const std::vector<const LogitsRow*>&, const SamplerParams&,
                            const std::vector<std::vector<int32_t>>&, const std::vector<double>&, int32_t*) const {
  fail(Status::internal, "the ", name(), " backend does not sample on a device");
}

}  // namespace glm5rt
