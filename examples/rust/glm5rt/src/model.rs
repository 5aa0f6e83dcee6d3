//! Models: loaded once, immutable, shared by any number of threads and sessions.
use std::any::Any;
use std::ffi::c_void;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr::{self, NonNull};

use glm5rt_sys as sys;

use crate::error::{check, Result};
use crate::util::c_path;

/// Where the model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// CUDA when a usable GPU exists, else the CPU.
    Auto,
    Cpu,
    Cuda,
}

impl Backend {
    fn raw(self) -> i32 {
        match self {
            Backend::Auto => sys::GLM5RT_BACKEND_AUTO,
            Backend::Cpu => sys::GLM5RT_BACKEND_CPU,
            Backend::Cuda => sys::GLM5RT_BACKEND_CUDA,
        }
    }
    fn from_raw(raw: i32) -> Backend {
        match raw {
            sys::GLM5RT_BACKEND_CPU => Backend::Cpu,
            sys::GLM5RT_BACKEND_CUDA => Backend::Cuda,
            _ => Backend::Auto,
        }
    }
}

/// Options of Model::load_with: `ModelParams::new().backend(Backend::Cpu).threads(4)`.
#[derive(Debug, Clone, Copy)]
pub struct ModelParams {
    backend: Backend,
    device_index: i32,
    threads: i32,
}

impl Default for ModelParams {
    fn default() -> Self {
        ModelParams {
            backend: Backend::Auto,
            device_index: 0,
            threads: 0,
        }
    }
}

impl ModelParams {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }
    /// CUDA device ordinal (default 0).
    pub fn device_index(mut self, index: i32) -> Self {
        self.device_index = index;
        self
    }
    /// CPU threads; 0 = all hardware threads (default).
    pub fn threads(mut self, n: i32) -> Self {
        self.threads = n;
        self
    }
}

/// What the library knows about a loaded model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    pub n_layers: i32,
    pub n_vocab: i32,
    pub hidden_size: i32,
    pub n_heads: i32,
    pub n_routed_experts: i32,
    pub n_experts_per_token: i32,
    pub n_dense_layers: i32,
    pub kv_lora_rank: i32,
    pub qk_rope_head_dim: i32,
    pub index_topk: i32,
    pub weight_dtype: i32,
    /// The backend actually in use.
    pub backend: Backend,
    pub context_length: i64,
    pub n_params: i64,
    pub weight_bytes: i64,
    pub eos_ids: Vec<i32>,
}

/// A loaded model. Immutable after loading, so it is `Send + Sync`: share it with `Arc<Model>`.
/// Sessions and tokenizers hold their own reference, so it may be dropped before them.
pub struct Model {
    raw: NonNull<sys::glm5rt_model>,
}

// SAFETY: glm5rt.h: "A glm5rt_model ... [is] immutable after creation: any number of threads may use
// them at once", and freeing may happen on any thread (reference counted by the library).
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

struct Progress<'a> {
    callback: &'a mut dyn FnMut(f32) -> bool,
    panic: Option<Box<dyn Any + Send>>,
}

unsafe extern "C" fn progress_trampoline(fraction: f32, user_data: *mut c_void) -> i32 {
    let progress = &mut *(user_data as *mut Progress<'_>);
    match catch_unwind(AssertUnwindSafe(|| (progress.callback)(fraction))) {
        Ok(keep_going) => keep_going as i32,
        Err(payload) => {
            // Cancel the load, then re-raise the panic on the Rust side of the boundary.
            progress.panic = Some(payload);
            0
        }
    }
}

impl Model {
    /// Loads config.json, the safetensors weights and tokenizer.json from `dir` with default options.
    pub fn load(dir: impl AsRef<Path>) -> Result<Model> {
        Self::load_with(dir, &ModelParams::default())
    }

    pub fn load_with(dir: impl AsRef<Path>, params: &ModelParams) -> Result<Model> {
        Self::load_impl(dir.as_ref(), params, None)
    }

    /// Loads with a progress callback: it receives the fraction done in [0, 1] and returns false to
    /// cancel (the load then fails with Status::Cancelled).
    pub fn load_with_progress(
        dir: impl AsRef<Path>,
        params: &ModelParams,
        mut progress: impl FnMut(f32) -> bool,
    ) -> Result<Model> {
        Self::load_impl(dir.as_ref(), params, Some(&mut progress))
    }

    fn load_impl(dir: &Path, params: &ModelParams, callback: Option<&mut dyn FnMut(f32) -> bool>) -> Result<Model> {
        let dir = c_path(dir)?;
        // SAFETY: default_params fills the whole struct (it is plain data).
        let mut raw_params = unsafe {
            let mut p = std::mem::MaybeUninit::<sys::glm5rt_model_params>::zeroed();
            sys::glm5rt_model_default_params(p.as_mut_ptr());
            p.assume_init()
        };
        raw_params.backend = params.backend.raw();
        raw_params.device_index = params.device_index;
        raw_params.n_threads = params.threads;
        let mut state = callback.map(|callback| Progress { callback, panic: None });
        if let Some(state) = state.as_mut() {
            raw_params.progress = Some(progress_trampoline);
            raw_params.progress_user_data = state as *mut Progress<'_> as *mut c_void;
        }
        let mut model = ptr::null_mut();
        // SAFETY: every pointer is valid for the call; the callback state outlives it.
        let code = unsafe { sys::glm5rt_model_load(dir.as_ptr(), &raw_params, &mut model) };
        if let Some(payload) = state.and_then(|s| s.panic) {
            if !model.is_null() {
                unsafe { sys::glm5rt_model_free(model) };
            }
            resume_unwind(payload);
        }
        check(code)?;
        Ok(Model {
            raw: NonNull::new(model).expect("glm5rt_model_load returned OK and NULL"),
        })
    }

    pub fn info(&self) -> Result<ModelInfo> {
        let mut i = sys::glm5rt_model_info {
            struct_size: std::mem::size_of::<sys::glm5rt_model_info>() as u32,
            ..Default::default()
        };
        // SAFETY: the model is valid; i is a writable struct of the size announced.
        check(unsafe { sys::glm5rt_model_get_info(self.raw.as_ptr(), &mut i) })?;
        let n_eos = i.n_eos.clamp(0, i.eos_ids.len() as i32) as usize;
        Ok(ModelInfo {
            n_layers: i.n_layers,
            n_vocab: i.n_vocab,
            hidden_size: i.hidden_size,
            n_heads: i.n_heads,
            n_routed_experts: i.n_routed_experts,
            n_experts_per_token: i.n_experts_per_token,
            n_dense_layers: i.n_dense_layers,
            kv_lora_rank: i.kv_lora_rank,
            qk_rope_head_dim: i.qk_rope_head_dim,
            index_topk: i.index_topk,
            weight_dtype: i.weight_dtype,
            backend: Backend::from_raw(i.backend),
            context_length: i.context_length,
            n_params: i.n_params,
            weight_bytes: i.weight_bytes,
            eos_ids: i.eos_ids[..n_eos].to_vec(),
        })
    }

    /// The raw handle, for calls this crate does not wrap. Borrowed: do not free it.
    pub fn as_ptr(&self) -> *mut sys::glm5rt_model {
        self.raw.as_ptr()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: we own one reference; sessions and tokenizers hold their own.
        unsafe { sys::glm5rt_model_free(self.raw.as_ptr()) }
    }
}
