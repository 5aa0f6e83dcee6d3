// A loaded GLM-5 checkpoint directory: the validated config, every tensor of the safetensors files as a
// view into the memory mappings (no copy), and the per-layer weight views the engine consumes.
//
// open() checks everything the engine relies on before anything runs: config.json fields, safetensors
// headers, FP8 block scales (dtype, ceil-div shape, finite values), and that every tensor the config
// implies exists with the shape the config implies. Extra tensors (the MTP layer
// model.layers.<num_hidden_layers>.*, anything else) are kept and reachable through find().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/safetensors.hpp"
#include "model/weights.hpp"

namespace glm5rt {

class Checkpoint {
 public:
  // Loads `dir` (config.json, optional generation_config.json, model.safetensors or the sharded form).
  // progress(fraction) is called as shards are mapped and tensors validated; returning false cancels with
  // Status::cancelled. Errors: io (missing files), format (the message names the file, tensor or field),
  // out_of_memory.
  static std::unique_ptr<Checkpoint> open(const std::string& dir,
                                          const std::function<bool(float)>& progress = {});

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

  // Any stored tensor by its checkpoint name (FP8 weights come with scale_inv attached), nullptr if absent.
  const TensorView* find(const std::string& name) const;
  // Every stored tensor, by name.
  const std::map<std::string, TensorView>& tensors() const { return views_; }

  // Parameters of the stored decoder: every tensor except FP8 scales and the MTP layers
  // (model.layers.<i>.* with i >= num_hidden_layers). A tied lm_head is not counted twice.
  int64_t n_params() const { return n_params_; }
  // Bytes of all stored tensors (scales and MTP layers included).
  int64_t weight_bytes() const { return weight_bytes_; }
  // The dtype of the decoder's projection weights as stored (q_b_proj of layer 0).
  DType weight_dtype() const { return weight_dtype_; }
  // A stable 64-bit hash of the parsed config, the tensor table (names, dtypes, shapes) and a few bytes of
  // content (final norm, the start of the embeddings and lm_head): equal checkpoints give equal values
  // across runs and machines; session snapshots carry it to refuse restoring into another model.
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  Checkpoint() = default;
  void build_views(const std::function<bool(float)>& progress);
  void build_layers();
  void compute_totals();

  std::string dir_;
  ModelConfig config_;
  SafetensorsSet files_;
  std::map<std::string, TensorView> views_;
  std::vector<std::vector<float>> owned_scales_;  // copies of scale tensors stored unaligned in the file
  ModelWeights weights_;
  int64_t n_params_ = 0;
  int64_t weight_bytes_ = 0;
  DType weight_dtype_ = DType::f32;
  uint64_t fingerprint_ = 0;
};

}  // namespace glm5rt
